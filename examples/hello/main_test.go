package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/themis-nomad/themis/driver/checkpoint"
)

var helloBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hello-test-")
	if err != nil {
		panic(err)
	}
	helloBin = filepath.Join(dir, "hello")
	if out, err := exec.Command("go", "build", "-o", helloBin, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("build hello: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running hello whose stdout is read line by line.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	all   []string
}

func start(t *testing.T, ckptDir string, args ...string) *proc {
	t.Helper()
	return startEnv(t, ckptDir, nil, args...)
}

// startEnv starts hello with THEMIS_CHECKPOINT_DIR=ckptDir and env added.
func startEnv(t *testing.T, ckptDir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(helloBin, args...)
	cmd.Env = append(os.Environ(), "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b", "CUDA_VISIBLE_DEVICES=0,1")
	cmd.Env = append(cmd.Env, "THEMIS_CHECKPOINT_DIR="+ckptDir)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &proc{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p
}

// until reads lines until one starts with prefix and returns it.
func (p *proc) until(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("hello exited before printing %q; output:\n%s", prefix, strings.Join(p.all, "\n"))
			}
			p.all = append(p.all, l)
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line %q within 20s; output:\n%s", prefix, strings.Join(p.all, "\n"))
		}
	}
}

// finish drains the output and checks the exit status is 0.
func (p *proc) finish(t *testing.T) []string {
	t.Helper()
	for l := range p.lines {
		p.all = append(p.all, l)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("hello: %v; output:\n%s", err, strings.Join(p.all, "\n"))
	}
	return p.all
}

var (
	stepLine = regexp.MustCompile(`^hello: step (\d+)/(\d+) loss=([0-9.]+)$`)
	ckptLine = regexp.MustCompile(`^hello: checkpointed at step (\d+), (exiting|continuing)$`)
)

// checkSteps checks steps run from first to last in order with a falling loss.
func checkSteps(t *testing.T, lines []string, first, last int) {
	t.Helper()
	want, prevLoss := first, 1e9
	for _, l := range lines {
		m := stepLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		step, _ := strconv.Atoi(m[1])
		loss, _ := strconv.ParseFloat(m[3], 64)
		if step != want {
			t.Fatalf("step %d printed, want %d; output:\n%s", step, want, strings.Join(lines, "\n"))
		}
		if loss >= prevLoss {
			t.Fatalf("loss %v at step %d does not fall below %v", loss, step, prevLoss)
		}
		want, prevLoss = want+1, loss
	}
	if want != last+1 {
		t.Fatalf("last step printed %d, want %d; output:\n%s", want-1, last, strings.Join(lines, "\n"))
	}
}

// readCkpt reads the newest complete checkpoint in dir.
func readCkpt(t *testing.T, dir string) state {
	t.Helper()
	c, ok, err := checkpoint.Latest(dir)
	if err != nil || !ok {
		t.Fatalf("no complete checkpoint in %s: %v", dir, err)
	}
	b, err := os.ReadFile(filepath.Join(c.Path, checkpointFile))
	if err != nil {
		t.Fatal(err)
	}
	var ck state
	if err := json.Unmarshal(b, &ck); err != nil {
		t.Fatal(err)
	}
	return ck
}

func TestRunWithoutCheckpoints(t *testing.T) {
	p := start(t, "", "-steps", "5", "-step-time", "5ms")
	if got, want := p.until(t, "hello: visible GPUs"), "hello: visible GPUs NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b CUDA_VISIBLE_DEVICES=0,1"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	lines := p.finish(t)
	checkSteps(t, lines, 1, 5)
	if lines[len(lines)-1] != "hello: done" {
		t.Fatalf("last line %q, want hello: done", lines[len(lines)-1])
	}
}

func TestSignalsCheckpointAndResume(t *testing.T) {
	cases := []struct {
		name   string
		signal syscall.Signal
		exits  bool
	}{
		{"SIGINT", syscall.SIGINT, true},
		{"SIGTERM", syscall.SIGTERM, true},
		{"SIGUSR1", syscall.SIGUSR1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			const steps = 40
			p := start(t, dir, "-steps", strconv.Itoa(steps), "-step-time", "20ms", "-checkpoint-every", "1000")
			p.until(t, "hello: step 3/")
			if err := p.cmd.Process.Signal(c.signal); err != nil {
				t.Fatal(err)
			}
			l := p.until(t, "hello: checkpointed at step ")
			m := ckptLine.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("bad checkpoint line %q", l)
			}
			n, _ := strconv.Atoi(m[1])
			if n < 3 {
				t.Fatalf("checkpointed at step %d, but step 3 was already printed", n)
			}
			if ck := readCkpt(t, dir); ck.Step != n {
				t.Fatalf("checkpoint holds step %d, line says %d", ck.Step, n)
			}
			lines := p.finish(t)
			if !c.exits {
				if !strings.HasSuffix(l, ", continuing") || lines[len(lines)-1] != "hello: done" {
					t.Fatalf("SIGUSR1 must checkpoint and continue; output:\n%s", strings.Join(lines, "\n"))
				}
				checkSteps(t, lines, 1, steps)
				return
			}
			if !strings.HasSuffix(l, ", exiting") || lines[len(lines)-1] != l {
				t.Fatalf("%s must checkpoint and exit; output:\n%s", c.name, strings.Join(lines, "\n"))
			}

			// Restart: it resumes after the checkpointed step.
			p2 := start(t, dir, "-steps", strconv.Itoa(steps), "-step-time", "1ms")
			if got, want := p2.until(t, "hello: resumed"), "hello: resumed from step "+strconv.Itoa(n); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			lines = p2.finish(t)
			checkSteps(t, lines, n+1, steps)
			if ck := readCkpt(t, dir); ck.Step != steps {
				t.Fatalf("final checkpoint holds step %d, want %d", ck.Step, steps)
			}
		})
	}
}

func TestPeriodicCheckpointsAreCompleteDirs(t *testing.T) {
	dir := t.TempDir()
	p := start(t, dir, "-steps", "6", "-step-time", "1ms", "-checkpoint-every", "2")
	p.finish(t)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := []string{"step-000000002", "step-000000004", "step-000000006"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("checkpoint dir holds %v, want %v (no temporaries)", got, want)
	}
	all, err := checkpoint.List(dir)
	if err != nil || len(all) != 3 {
		t.Fatalf("complete checkpoints %v, %v; want all three", all, err)
	}
	if ck := readCkpt(t, dir); ck.Step != 6 {
		t.Fatalf("checkpoint step %d, want 6", ck.Step)
	}
}

// writeCkpt makes a checkpoint of step in dir, complete or not.
func writeCkpt(t *testing.T, dir, name string, step int, complete bool) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(state{Step: step})
	if err := os.WriteFile(filepath.Join(p, checkpointFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if complete {
		if err := os.WriteFile(filepath.Join(p, checkpoint.Marker), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestResume(t *testing.T) {
	cases := []struct {
		name string
		env  func(dir, older string) []string
		want string // the "resumed" line, "" for none
	}{
		{"newest complete, not the newer incomplete one", func(string, string) []string { return nil }, "hello: resumed from step 20"},
		{"THEMIS_RESUME_FROM wins", func(_, older string) []string { return []string{"THEMIS_RESUME_FROM=" + older} }, "hello: resumed from step 10"},
		{"empty THEMIS_RESUME_FROM is a first start", func(string, string) []string { return []string{"THEMIS_RESUME_FROM="} }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			older := writeCkpt(t, dir, "step-000000010", 10, true)
			writeCkpt(t, dir, "step-000000020", 20, true)
			writeCkpt(t, dir, "step-000000030", 30, false) // cut short
			p := startEnv(t, dir, append(c.env(dir, older), "THEMIS_RESTART_COUNT=2"), "-steps", "25", "-step-time", "1ms", "-checkpoint-every", "0")
			lines := p.finish(t)
			if lines[1] != "hello: restart count 2" {
				t.Fatalf("second line %q, want the restart count; output:\n%s", lines[1], strings.Join(lines, "\n"))
			}
			first := 1
			if c.want != "" {
				if lines[2] != c.want {
					t.Fatalf("got %q, want %q", lines[2], c.want)
				}
				first, _ = strconv.Atoi(c.want[strings.LastIndexByte(c.want, ' ')+1:])
				first++
			}
			checkSteps(t, lines, first, 25)
			if ck := readCkpt(t, dir); ck.Step != 25 {
				t.Fatalf("final checkpoint at step %d, want 25", ck.Step)
			}
		})
	}
}

// The notice file stops hello like the signal does.
func TestNoticeFile(t *testing.T) {
	dir := t.TempDir()
	noticeFile := filepath.Join(dir, "notice.json")
	p := startEnv(t, dir, []string{"THEMIS_NOTICE_FILE=" + noticeFile}, "-steps", "1000", "-step-time", "10ms", "-checkpoint-every", "0")
	p.until(t, "hello: step 3/")
	if err := os.WriteFile(noticeFile, []byte(`{"reason":"preempted","deadline":"2026-01-01T00:00:30Z"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := p.until(t, "hello: notice: "); l != "hello: notice: preempted, deadline 2026-01-01T00:00:30Z" {
		t.Fatalf("notice line %q", l)
	}
	l := p.until(t, "hello: checkpointed at step ")
	m := ckptLine.FindStringSubmatch(l)
	if m == nil || m[2] != "exiting" {
		t.Fatalf("bad checkpoint line %q", l)
	}
	p.finish(t)
	if n, _ := strconv.Atoi(m[1]); readCkpt(t, dir).Step != n {
		t.Fatalf("checkpoint does not hold step %d", n)
	}
}

// -checkpoint-time makes a checkpoint take that long; -ignore-signals makes
// hello ignore SIGTERM and the notice.
func TestCheckpointTimeAndIgnoreSignals(t *testing.T) {
	dir := t.TempDir()
	p := start(t, dir, "-steps", "1000", "-step-time", "5ms", "-checkpoint-every", "0", "-checkpoint-time", "300ms")
	p.until(t, "hello: step 3/")
	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.until(t, "hello: checkpointed at step ")
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("checkpoint took %s, want at least -checkpoint-time 300ms", took)
	}
	p.finish(t)

	dir2 := t.TempDir()
	noticeFile := filepath.Join(dir2, "notice.json")
	q := startEnv(t, dir2, []string{"THEMIS_NOTICE_FILE=" + noticeFile}, "-steps", "1000", "-step-time", "5ms", "-ignore-signals")
	q.until(t, "hello: step 3/")
	if err := os.WriteFile(noticeFile, []byte(`{"reason":"r"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := q.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	q.until(t, "hello: ignoring SIGTERM")
	q.until(t, "hello: step 100/") // still training
	for _, l := range q.all {
		if strings.HasPrefix(l, "hello: notice") || strings.Contains(l, "exiting") {
			t.Fatalf("an ignoring hello reacted: %q", l)
		}
	}
}
