package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
)

// The PyTorch jobs of examples/pytorch (train.py through the themis_ckpt
// helper) run on Debian's python3-torch at /usr/bin/python3, which `make
// test` installs where it is missing (examples/pytorch/setup-torch.sh).

const torchPython = "/usr/bin/python3"

var torchCheck struct {
	once sync.Once
	why  string
}

// needTorch skips the test when /usr/bin/python3 cannot import torch, or
// fails it where THEMIS_REQUIRE_TORCH=1 (CI, which installs it).
func needTorch(t testing.TB) {
	t.Helper()
	torchCheck.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, torchPython, "-c", "import torch, torch.distributed as d; assert d.is_gloo_available()").CombinedOutput(); err != nil {
			torchCheck.why = fmt.Sprintf("%s cannot run torch with gloo (%v: %s): apt-get install python3-torch, or make torch",
				torchPython, err, strings.TrimSpace(lastLines(string(out), 1)))
		}
	})
	if torchCheck.why == "" {
		return
	}
	if os.Getenv("THEMIS_REQUIRE_TORCH") == "1" {
		t.Fatal(torchCheck.why + " (THEMIS_REQUIRE_TORCH=1)")
	}
	t.Skip(torchCheck.why)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// torchJob is a PyTorch job from examples/jobs/pytorch.nomad.hcl (or, with
// gang, pytorch-gang.nomad.hcl: torchrun through the helper's launcher),
// parsed by the nomad CLI, with its stanza and train.py's flags changed.
type torchJob struct {
	gang  bool
	gpus  int
	class string // "" = the example's ("be")
	grace string // "" = the example's
	app   string
	steps int
	// args are more train.py flags (e.g. --log-every 1, --lr 1e-3).
	args []string
}

func (o torchJob) build(t testing.TB, id string) *nomadapi.Job {
	t.Helper()
	file := "pytorch.nomad.hcl"
	if o.gang {
		file = "pytorch-gang.nomad.hcl"
	}
	out, err := exec.Command(env.nomadBin, "job", "run", "-output",
		"-var", "pytorch_dir="+env.pytorchDir, "-var", fmt.Sprintf("steps=%d", o.steps),
		filepath.Join(env.root, "examples", "jobs", file)).Output()
	if err != nil {
		t.Fatalf("nomad job run -output %s: %v: %s", file, err, stderrOf(err))
	}
	var wrapped struct{ Job *nomadapi.Job }
	if err := json.Unmarshal(out, &wrapped); err != nil || wrapped.Job == nil {
		t.Fatalf("decode job JSON: %v\n%s", err, out)
	}
	job := wrapped.Job
	job.ID, job.Name = &id, &id
	task := job.TaskGroups[0].Tasks[0]
	stanza := task.Config["themis"].([]any)[0].(map[string]any)
	if o.gpus != 0 {
		stanza["gpus"] = o.gpus
	}
	if o.class != "" {
		stanza["class"] = o.class
	}
	if o.grace != "" {
		stanza["grace_period"] = o.grace
	}
	if o.app != "" {
		stanza["app"] = o.app
	}
	args := task.Config["args"].([]any)
	for _, a := range o.args {
		args = append(args, a)
	}
	task.Config["args"] = args
	return job
}

// trainStdout is what the task "train" printed in allocation id of the
// Nomad at c.
func trainStdout(c *nomadapi.Client, id string) (string, error) {
	a, _, err := c.Allocations().Info(id, nil)
	if err != nil {
		return "", err
	}
	r, err := c.AllocFS().Cat(a, "alloc/logs/train.stdout.0", nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// trainStderr is the task's stderr, for failure messages.
func trainStderr(c *nomadapi.Client, id string) string {
	a, _, err := c.Allocations().Info(id, nil)
	if err != nil {
		return err.Error()
	}
	r, err := c.AllocFS().Cat(a, "alloc/logs/train.stderr.0", nil)
	if err != nil {
		return err.Error()
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return lastLines(string(b), 30)
}

var (
	trainStepRE     = regexp.MustCompile(`(?m)^train: step (\d+) loss (\S+)`)
	trainCkptRE     = regexp.MustCompile(`(?m)^train: checkpointed at step (\d+) in (\S+) s \((\d+) bytes\), exiting`)
	trainResumedRE  = regexp.MustCompile(`(?m)^train: resumed from step (\d+) in (\S+) s`)
	trainDoneRE     = regexp.MustCompile(`(?m)^train: done step (\d+) loss (\S+) digest ([0-9a-f]+)`)
	trainStoppingRE = regexp.MustCompile(`(?m)^train: stopping: (.*); data position epoch (\d+) batch (\d+) of (\d+)`)
	trainRankRE     = regexp.MustCompile(`(?m)^train: rank (\d+) of (\d+) \((\w+)\), master (\S+):(\d+)`)
)

// lossCurve is a run's printed losses by step, as printed (so equal runs
// compare equal as strings).
type lossCurve map[int]string

func curveOf(out string) lossCurve {
	c := lossCurve{}
	for _, m := range trainStepRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		c[n] = m[2]
	}
	return c
}

func (c lossCurve) steps() []int {
	var s []int
	for k := range c {
		s = append(s, k)
	}
	sort.Ints(s)
	return s
}

// meanOver is the mean loss of the printed steps in [from, to].
func (c lossCurve) meanOver(from, to int) (float64, int) {
	sum, n := 0.0, 0
	for s, v := range c {
		if s >= from && s <= to {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return sum / float64(n), n
}

// referenceRun runs train.py (or, with ranks > 1, ranks processes under
// torchrun through the helper's launcher) here, outside Nomad, with no
// preemption: the run the preempted one must equal. It returns a func
// that waits for its stdout.
func referenceRun(t *testing.T, ranks int, steps int, args ...string) func() string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(env.pytorchDir, "train.py")
	cmdArgs := append([]string{script, "--steps", strconv.Itoa(steps)}, args...)
	if ranks > 1 {
		cmdArgs = append([]string{filepath.Join(env.pytorchDir, "themis_ckpt.py"), "torchrun",
			"--nproc-per-node", strconv.Itoa(ranks)}, cmdArgs...)
	}
	ctx, cancel := context.WithTimeout(env.ctx, 5*time.Minute)
	cmd := exec.CommandContext(ctx, torchPython, cmdArgs...)
	cmd.Env = append(os.Environ(), "THEMIS_CHECKPOINT_DIR="+filepath.Join(dir, "ckpt"), "PYTHONDONTWRITEBYTECODE=1",
		"THEMIS_GANG_SIZE=1", "THEMIS_GANG_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(freePort(t)))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); cancel() }()
	return func() string {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatalf("reference run %v: %v\nstdout:\n%s\nstderr:\n%s", cmdArgs, err, lastLines(stdout.String(), 20), lastLines(stderr.String(), 30))
		}
		return stdout.String()
	}
}

// checkContinuity checks that a run preempted after step at (before: what
// it printed until then; after: the resumed run) continues its curve: the
// resumed run's first step is at+1, its loss does not start over, every
// printed loss equals the uninterrupted reference's at the same step, and
// both end with the same weights.
func checkContinuity(t *testing.T, who string, before, after, reference string, at int) {
	t.Helper()
	b, a, r := curveOf(before), curveOf(after), curveOf(reference)
	as := a.steps()
	if len(as) == 0 || as[0] != at+1 {
		t.Fatalf("%s: the resumed run's first step is %v, want %d (the step count continues)", who, as, at+1)
	}
	lastBefore, n1 := b.meanOver(at-9, at)
	firstAfter, n2 := a.meanOver(at+1, at+10)
	if n1 == 0 || n2 == 0 {
		t.Fatalf("%s: no losses printed around step %d (before %d, after %d)", who, at, n1, n2)
	}
	// Minibatch losses are noisy; a run that lost its model, optimizer or
	// schedule starts over near ln(10) = 2.30.
	if math.Abs(firstAfter-lastBefore) > 0.3*lastBefore {
		t.Errorf("%s: mean loss of the 10 steps after resuming %.4f, of the 10 before %.4f: not within 30%%", who, firstAfter, lastBefore)
	}
	mismatch := 0
	for _, c := range []lossCurve{b, a} {
		for s, v := range c {
			if want, ok := r[s]; !ok || want != v {
				if mismatch++; mismatch <= 5 {
					t.Errorf("%s: step %d: loss %s, uninterrupted %s", who, s, v, want)
				}
			}
		}
	}
	d, rd := trainDoneRE.FindStringSubmatch(after), trainDoneRE.FindStringSubmatch(reference)
	if d == nil || rd == nil {
		t.Fatalf("%s: no final line (resumed %v, reference %v)", who, d, rd)
	}
	if d[3] != rd[3] {
		t.Errorf("%s: final weights differ: digest %s (loss %s) after the preemption, %s (loss %s) uninterrupted", who, d[3], d[2], rd[3], rd[2])
	}
	t.Logf("%s: preempted after step %d; loss around it %.4f before, %.4f after; %d printed losses equal to the uninterrupted run's; final digest %.16s... equal: %v",
		who, at, lastBefore, firstAfter, len(b)+len(a)-mismatch, d[3], d[3] == rd[3])
}

// writeCurves writes the preempted and the uninterrupted run's losses to
// $THEMIS_PYTORCH_CURVES/<name>.csv when that is set (the figure in
// docs/pytorch.md: go run ./examples/pytorch/lossplot).
func writeCurves(t *testing.T, name string, at int, before, after, reference string) {
	dir := os.Getenv("THEMIS_PYTORCH_CURVES")
	if dir == "" {
		return
	}
	var sb strings.Builder
	sb.WriteString("run,step,loss\n")
	for _, run := range []struct {
		name string
		c    lossCurve
	}{{"uninterrupted", curveOf(reference)}, {"preempted", curveOf(before)}, {"resumed", curveOf(after)}} {
		for _, s := range run.c.steps() {
			fmt.Fprintf(&sb, "%s,%d,%s\n", run.name, s, run.c[s])
		}
	}
	fmt.Fprintf(&sb, "preemption,%d,\n", at)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".csv"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// freePort is a port for an agent or a task to listen on (devstack.FreePort:
// below the ephemeral range, free for TCP and UDP, never handed out twice).
func freePort(t testing.TB) int {
	t.Helper()
	p, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
