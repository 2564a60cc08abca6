package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/e2e/browser"
	"github.com/themis-nomad/themis/planner/httpapi"
)

// themisCLI runs the themis binary against the suite's agents and planner
// API, and returns its exit code and output.
func themisCLI(t *testing.T, timeout time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(env.themis, args...)
	cmd.Env = append(os.Environ(), "NOMAD_ADDR="+env.stack.NomadAddr(), "CONSUL_HTTP_ADDR="+env.stack.ConsulAddr(), "THEMIS_ADDR="+env.apiURL)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("themis %s ran past %s:\n%s\n%s", strings.Join(args, " "), timeout, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// helloFile writes examples/jobs/hello.nomad.hcl as job id, with the given
// replacements of its text, and returns its path; the job is purged when
// the test ends.
func helloFile(t *testing.T, id string, replace ...string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(env.root, "examples", "jobs", "hello.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), `job "hello" {`, fmt.Sprintf("job %q {", id), 1)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(text, replace[i]) {
			t.Fatalf("hello.nomad.hcl has no %q", replace[i])
		}
		text = strings.Replace(text, replace[i], replace[i+1], 1)
	}
	file := filepath.Join(t.TempDir(), id+".nomad.hcl")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = env.nomad.Jobs().Deregister(id, true, nil) })
	return file
}

// First contact and the operator views on the real agents, under FitGpp:
// themis job run follows a trial-and-error job that queues behind the
// best-effort job it preempts until it runs (exit 0); -detach returns at
// once (a best-effort job that then waits); a rejected stanza exits 1 with the reason and submits nothing; a
// task that cannot start exits 1 with Nomad's reason, and the job is
// "failed" in the API, the metrics and themis status. themis job explain
// on the preempted, the running and a waiting job; the views' -json are
// the API's documents; with no planner API, themis leases reads Consul
// and says so.
func TestCLIFirstContactAndViews(t *testing.T) {
	usePolicy(t, "fitgpp")
	be, te, wait, bad, broken := "e2e-cli-be", "e2e-cli-te", "e2e-cli-wait", "e2e-cli-bad", "e2e-cli-broken"
	trainJob{gpus: 8, grace: "10s", steps: 3000}.run(t, be)
	waitRunning(t, be, 60*time.Second)

	run := func(id string, args ...string) (int, string, string) {
		return themisCLI(t, 2*time.Minute, append([]string{"job", "run", "-var", "hello_bin=" + env.helloBin}, args...)...)
	}
	code, out, errOut := run(te, helloFile(t, te, `class        = "be"`, `class        = "te"`, `default = 300`, `default = 900`))
	if code != 0 {
		t.Fatalf("themis job run %s: exit %d\n%s\n%s", te, code, out, errOut)
	}
	for _, want := range []string{`Submitted job "` + te + `"`, "waiting: position 1 in its queue: granted 2 GPUs on dev-node; waiting for default/" + be + " to stop",
		"granted: 2 GPUs on dev-node", "running: allocation "} {
		if !strings.Contains(out, want) {
			t.Errorf("themis job run %s printed no %q:\n%s", te, want, out)
		}
	}
	t.Logf("themis job run:\n%s", out)

	code, out, errOut = run(wait, "-detach", helloFile(t, wait, `gpus         = 2`, `gpus         = 8`))
	if code != 0 || !strings.Contains(out, `Submitted job "`+wait+`"`) || !strings.Contains(out, "detached") {
		t.Fatalf("-detach: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(bad, helloFile(t, bad, `gpus         = 2`, `gpus         = "two"`))
	if code != 1 || !strings.Contains(errOut, "rejected, nothing submitted") || !strings.Contains(errOut, `themis.gpus: must be a whole number, got "two"`) {
		t.Errorf("a rejected stanza: exit %d\n%s\n%s", code, out, errOut)
	}
	if j, _, err := env.nomad.Jobs().Info(bad, nil); err == nil {
		t.Errorf("the rejected job was submitted: %s", *j.Status)
	}

	// A task that cannot start: its command is not executable (a
	// trial-and-error job, so that it is next).
	code, out, errOut = themisCLI(t, 2*time.Minute, "job", "run", "-var", "hello_bin=/tmp",
		helloFile(t, broken, `gpus         = 2`, `gpus         = 1`, `class        = "be"`, `class        = "te"`))
	if code != 1 || !strings.Contains(out, "failed: task \"hello\"") || !strings.Contains(out, "permission denied") {
		t.Errorf("a task that cannot start: exit %d\n%s\n%s", code, out, errOut)
	}
	c := &httpapi.Client{Addr: env.apiURL}
	var job httpapi.Job
	eventually(t, 30*time.Second, broken+" failed in the API", func() (bool, error) {
		_, err := c.Get(env.ctx, "/v1/jobs/default/"+broken, 0, 0, &job)
		return job.State == "failed", err
	})
	if !strings.Contains(job.Reason, "permission denied") {
		t.Errorf("%s: %+v, want failed with Nomad's reason", broken, job)
	}
	if st := jobStatus(t, broken); st == nil || st.State != "failed" || !strings.Contains(st.Reason, "permission denied") {
		t.Errorf("status record of %s: %+v", broken, st)
	}
	if m, err := httpGet(env.ctx, env.apiURL+"/metrics"); err != nil || !strings.Contains(m.body, `themis_jobs{state="failed"} 1`) {
		t.Errorf("the metrics do not count the failed job (%v)", err)
	}
	_, out, _ = themisCLI(t, time.Minute, "status")
	if !strings.Contains(out, "default/"+broken+"  failed") {
		t.Errorf("themis status:\n%s", out)
	}

	explain := func(id string) explanationDoc {
		code, out, errOut := themisCLI(t, time.Minute, "job", "explain", "-json", id)
		if code != 0 {
			t.Fatalf("job explain %s: exit %d: %s", id, code, errOut)
		}
		var x explanationDoc
		if err := json.Unmarshal([]byte(out), &x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	var x explanationDoc
	eventually(t, 30*time.Second, be+" suspended", func() (bool, error) {
		x = explain(be)
		return x.State == "suspended", nil
	})
	if x.Preemptions != 1 || len(x.Preempted) != 1 || !strings.Contains(x.Preempted[0].Reason, te) {
		t.Errorf("explain %s (preempted): %+v", be, x)
	}
	if x := explain(te); x.State != "granted" || x.Lease == nil || len(x.Lease.GPUs) != 2 {
		t.Errorf("explain %s (running): %+v", te, x)
	}
	x = explain(wait)
	if x.State != "queued" || x.Position < 1 || len(x.Options) == 0 {
		t.Errorf("explain %s (waiting): %+v", wait, x)
	}
	_, text, _ := themisCLI(t, time.Minute, "job", "explain", wait)
	t.Logf("themis job explain %s:\n%s", wait, text)

	// The views' -json are the API's documents.
	for view, path := range map[string]string{"queue": "/v1/queue", "leases": "/v1/leases", "nodes": "/v1/nodes", "apps": "/v1/apps"} {
		var fromCLI, fromAPI any
		eventually(t, 10*time.Second, "themis "+view+" -json as the API", func() (bool, error) {
			code, out, errOut := themisCLI(t, time.Minute, view, "-json")
			if code != 0 {
				return false, fmt.Errorf("exit %d: %s", code, errOut)
			}
			if err := json.Unmarshal([]byte(out), &fromCLI); err != nil {
				return false, err
			}
			_, err := c.Get(env.ctx, path, 0, 0, &fromAPI)
			return fmt.Sprint(fromCLI) == fmt.Sprint(fromAPI), err // the view may move between the two reads
		})
	}
	// THEMIS_SCREENSHOTS=DIR: the dashboard with all of it (docs/img).
	if dir := os.Getenv("THEMIS_SCREENSHOTS"); dir != "" {
		if err := browser.Find(t).Screenshot(env.ctx, env.apiURL+"/ui/#once", 5*time.Second, filepath.Join(dir, "dashboard.png"), 1280, 1000); err != nil {
			t.Error(err)
		}
	}
	code, out, errOut = themisCLI(t, time.Minute, "leases", "-address", "http://127.0.0.1:1")
	if code != 0 || !strings.Contains(errOut, "no planner API at http://127.0.0.1:1") || !strings.Contains(out, "default/"+te) {
		t.Errorf("themis leases without a planner: exit %d\n%s\n%s", code, out, errOut)
	}
}

// explanationDoc is themis job explain -json's document (cmd/themis).
type explanationDoc struct {
	State       string             `json:"state"`
	Position    int                `json:"position"`
	Lease       *httpapi.Lease     `json:"lease"`
	Preemptions int                `json:"preemptions"`
	Preempted   []httpapi.Decision `json:"preempted"`
	Options     []string           `json:"options"`
}
