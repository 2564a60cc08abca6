package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"

	"github.com/themis-nomad/themis/planner/nomad"
)

// themis job run: nomad job run for themis jobs, which then follows the
// job through the planner until it runs.
type jobRunCommand struct {
	ui  cli.Ui
	out io.Writer
}

func (c *jobRunCommand) Synopsis() string {
	return "Submit a job (as nomad job run) and follow it until it runs: queued, granted, running"
}

func (c *jobRunCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis job run [options] FILE

  Parses the jobspec FILE ("-" reads standard input) as nomad job run does
  (HCL2 with -var, -var-file and NOMAD_VAR_* variables, file functions
  relative to the working folder; -json for a JSON job), checks its themis
  stanza and the whole job as the planner will, submits it through Nomad's
  API, then follows it through the planner: queued (its position in its
  virtual cluster's queue and why it waits), granted (node, GPUs, lease),
  running (its allocation started).

  It exits 0 once the job runs (or at once with -detach), and non-zero only
  for a real failure: a job the planner would reject (nothing is
  submitted; the reason is printed) or did reject, a submission Nomad
  refused, an allocation that failed (Nomad's reason). A job that waits
  for GPUs is not a failure: it is followed until it runs; Ctrl-C stops
  following (exit 130) and leaves the job queued.

  nomad job run -detach FILE submits a themis job the plain Nomad way (it
  then waits in the themis-pending pool until the planner grants it GPUs).

Options:

  -address ADDR        Nomad's HTTP API (default $NOMAD_ADDR or
                       http://127.0.0.1:4646); -token ($NOMAD_TOKEN),
                       -namespace ($NOMAD_NAMESPACE) and -region as in nomad
  -themis-address URL  the planner's HTTP API (default $THEMIS_ADDR or
                       http://127.0.0.1:4680); where none serves it, the job
                       is followed through Consul's status records
                       (-consul-addr, default $CONSUL_HTTP_ADDR)
  -var 'key=value'     a jobspec variable (repeatable)
  -var-file FILE       a file of jobspec variables (repeatable)
  -json                FILE is a JSON job (as nomad job run -output or nomad
                       job inspect write it)
  -hcl2-strict         fail on undeclared variables (default true)
  -check-index N       submit only if the job's modify index is N (0: only
                       if the job does not exist yet)
  -detach              submit and exit without following
  -output              print the job as JSON and exit, submitting nothing
`)
}

type jobRunOptions struct {
	nomadAddr, token, namespace, region string
	themisAddr, consulAddr, checkIndex  string
	vars, varFiles                      stringList
	json, strict, detach, output        bool
}

func jobRunFlags(o *jobRunOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("job run", flag.ContinueOnError)
	fs.StringVar(&o.nomadAddr, "address", "", "Nomad's HTTP API")
	fs.StringVar(&o.token, "token", "", "Nomad ACL token")
	fs.StringVar(&o.namespace, "namespace", "", "Nomad namespace")
	fs.StringVar(&o.region, "region", "", "Nomad region")
	fs.StringVar(&o.themisAddr, "themis-address", defaultAddress(), "the planner's HTTP API")
	fs.StringVar(&o.consulAddr, "consul-addr", "", "Consul, where no planner serves the API")
	fs.Var(&o.vars, "var", "a jobspec variable")
	fs.Var(&o.varFiles, "var-file", "a file of jobspec variables")
	fs.BoolVar(&o.json, "json", false, "FILE is a JSON job")
	fs.BoolVar(&o.strict, "hcl2-strict", true, "fail on undeclared variables")
	fs.StringVar(&o.checkIndex, "check-index", "", "submit only at this job modify index")
	fs.BoolVar(&o.detach, "detach", false, "submit and exit")
	fs.BoolVar(&o.output, "output", false, "print the job as JSON and exit")
	return fs
}

func (c *jobRunCommand) stdout() io.Writer {
	if c.out == nil {
		return os.Stdout
	}
	return c.out
}

func (c *jobRunCommand) Run(args []string) int {
	var o jobRunOptions
	fs := jobRunFlags(&o)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		c.ui.Error("themis job run: " + err.Error() + "\n\n" + c.Help())
		return 2
	}
	if fs.NArg() != 1 {
		c.ui.Error("themis job run: give one jobspec FILE\n\n" + c.Help())
		return 2
	}
	if o.json && (len(o.vars) > 0 || len(o.varFiles) > 0) {
		c.ui.Error("themis job run: -var and -var-file do not apply to a JSON job (-json)")
		return 2
	}
	var index uint64
	if o.checkIndex != "" {
		n, err := strconv.ParseUint(o.checkIndex, 10, 64)
		if err != nil {
			c.ui.Error(fmt.Sprintf("themis job run: -check-index %q: want a job modify index (a whole number)", o.checkIndex))
			return 2
		}
		index = n
	}
	sub, job, err := readJob(fs.Arg(0), o, os.Stdin)
	if err != nil {
		c.ui.Error("themis job run: " + err.Error())
		return 1
	}
	cfg := nomadapi.DefaultConfig()
	if o.nomadAddr != "" {
		cfg.Address = o.nomadAddr
	}
	cfg.SecretID = cmp.Or(o.token, cfg.SecretID)
	cfg.Namespace = cmp.Or(o.namespace, cfg.Namespace)
	cfg.Region = cmp.Or(o.region, cfg.Region)
	if job.Namespace == nil || *job.Namespace == "" {
		ns := cmp.Or(cfg.Namespace, "default")
		job.Namespace = &ns
	}
	if o.output {
		b, err := json.MarshalIndent(struct{ Job *nomadapi.Job }{job}, "", "    ")
		if err != nil {
			c.ui.Error("themis job run: " + err.Error())
			return 1
		}
		fmt.Fprintf(c.stdout(), "%s\n", b)
		return 0
	}
	task, err := precheck(job)
	if err != nil {
		c.ui.Error("themis job run: rejected, nothing submitted: " + safe(err.Error()))
		return 1
	}
	nc, err := nomadapi.NewClient(cfg)
	if err != nil {
		c.ui.Error("themis job run: " + err.Error())
		return 1
	}
	ropts := &nomadapi.RegisterOptions{Submission: sub}
	if o.checkIndex != "" {
		ropts.EnforceIndex, ropts.ModifyIndex = true, index
	}
	q := &nomadapi.WriteOptions{Namespace: *job.Namespace}
	resp, _, err := nc.Jobs().RegisterOpts(job, ropts, q)
	if err != nil {
		c.ui.Error(fmt.Sprintf("themis job run: Nomad refused the job: %s", safe(err.Error())))
		return 1
	}
	submitted := time.Now()
	if resp.Warnings != "" {
		c.ui.Warn("themis job run: Nomad's warnings:\n" + safe(resp.Warnings))
	}
	id := *job.ID
	fmt.Fprintf(c.stdout(), "==> %s: Submitted job %q (namespace %q, job modify index %d)\n", stamp(submitted), safe(id), safe(*job.Namespace), resp.JobModifyIndex)
	if task == "" {
		fmt.Fprintf(c.stdout(), "    %s: not a themis job (no themis task): Nomad places it as it is\n", stamp(time.Now()))
		return 0
	}
	if o.detach {
		fmt.Fprintf(c.stdout(), "    %s: detached: themis job explain %s shows where it is\n", stamp(time.Now()), safe(*job.Namespace+"/"+id))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := &follower{out: c.stdout(), job: *job.Namespace + "/" + id, task: task, submitIndex: resp.JobModifyIndex, submitted: submitted}
	code := f.run(ctx, followSources{nomad: nc, namespace: *job.Namespace, id: id, themis: o.themisAddr, consulAddr: o.consulAddr,
		warn: c.ui.Warn})
	if ctx.Err() != nil && code == codeInterrupted {
		c.ui.Warn(fmt.Sprintf("themis job run: stopped following; the job stays submitted (themis job explain %s)", safe(f.job)))
	}
	return code
}

// readJob parses the jobspec as nomad job run does, and the submission
// (its source and variables) Nomad keeps with the job.
func readJob(path string, o jobRunOptions, stdin io.Reader) (*nomadapi.JobSubmission, *nomadapi.Job, error) {
	var src []byte
	var err error
	name := filepath.Base(path)
	if path == "-" {
		src, err = io.ReadAll(stdin)
		name = "stdin"
	} else {
		src, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the jobspec: %w", err)
	}
	if o.json {
		var either struct {
			Nested *nomadapi.Job `json:"Job"`
			nomadapi.Job
		}
		if err := json.NewDecoder(bytes.NewReader(src)).Decode(&either); err != nil {
			return nil, nil, fmt.Errorf("parse the JSON job %s: %w", path, err)
		}
		job := either.Nested
		if job == nil {
			job = &either.Job
		}
		if job.ID == nil || *job.ID == "" {
			return nil, nil, fmt.Errorf("the JSON job %s has no ID", path)
		}
		return &nomadapi.JobSubmission{Source: string(src), Format: "json"}, job, nil
	}
	env := os.Environ()
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{Path: name, Body: src, ArgVars: o.vars, AllowFS: true,
		VarFiles: o.varFiles, Envs: env, Strict: o.strict})
	if err != nil {
		return nil, nil, fmt.Errorf("parse the jobspec %s:\n%v", path, err)
	}
	var varFiles strings.Builder
	for _, f := range o.varFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("-var-file: %w", err)
		}
		varFiles.Write(b)
		varFiles.WriteString("\n")
	}
	flags := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, jobspec2.VarEnvPrefix) {
			flags[strings.TrimPrefix(k, jobspec2.VarEnvPrefix)] = v
		}
	}
	args := map[string]string{}
	for _, kv := range o.vars {
		k, v, _ := strings.Cut(kv, "=")
		args[k] = v
	}
	maps.Copy(flags, args)
	return &nomadapi.JobSubmission{Source: string(src), Format: "hcl2", VariableFlags: flags, Variables: varFiles.String()}, job, nil
}

// precheck checks the job as the planner will read it from Nomad (its
// JSON), so that a job the planner would reject is not submitted. It
// returns the themis task's name ("" for a job without one).
func precheck(job *nomadapi.Job) (string, error) {
	b, err := json.Marshal(job)
	if err != nil {
		return "", err
	}
	var read nomadapi.Job
	if err := json.Unmarshal(b, &read); err != nil {
		return "", err
	}
	tj, err := nomad.ParseJob(&read)
	if errors.Is(err, nomad.ErrNotThemis) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if tj.Err != nil {
		return "", tj.Err
	}
	return tj.Task, nil
}

// stamp is a time as nomad's monitor prints it.
func stamp(t time.Time) string { return t.Format(time.RFC3339) }
