package gpususpend

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/driver/internal/gputest"
)

// EnvSuspendGiB lists the sizes (GiB, comma separated) the real-GPU test
// suspends; default 8.
const EnvSuspendGiB = "THEMIS_SUSPEND_GIB"

// EnvSuspendReport names a file the real-GPU test writes its table to, for
// docs/checkpoints.md.
const EnvSuspendReport = "THEMIS_SUSPEND_REPORT"

// TestRealGPU_SuspendInPlace suspends a PyTorch process holding N GiB of
// known data on the GPU, checks that its GPU memory is released while its
// host memory grows, resumes it, and has the process check every byte. It
// skips where libcuda or a CUDA PyTorch is missing (CI). On a GPU machine:
//
//	go test -c -o gpususpend.test ./driver/gpususpend/   # where Go is
//	THEMIS_SUSPEND_GIB=8,64 ./gpususpend.test -test.run RealGPU -test.v
func TestRealGPU_SuspendInPlace(t *testing.T) {
	lib, err := Open()
	if err != nil {
		t.Skip(err)
	}
	python, why := gputest.TorchPython()
	if python == "" {
		t.Skip(why)
	}
	sizes := []int{8}
	if v := os.Getenv(EnvSuspendGiB); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want whole GiB counts", EnvSuspendGiB, v)
			}
			sizes = append(sizes, n)
		}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "CUDA driver API %d; %s\n\n", lib.DriverVersion(), python)
	report.WriteString("| GiB | lock | checkpoint (to host) | GiB/s | restore (to GPU) | GiB/s | unlock | GPU MiB before / suspended / resumed | RSS MiB before / suspended / resumed | data |\n")
	report.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, gib := range sizes {
		t.Run(fmt.Sprintf("%dGiB", gib), func(t *testing.T) {
			row := suspendOnce(t, lib, python, gib)
			report.WriteString(row + "\n")
		})
	}
	t.Log("\n" + report.String())
	if path := os.Getenv(EnvSuspendReport); path != "" {
		if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// holder is the Python process of testdata/holder.py.
type holder struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startHolder(t *testing.T, python string, gib int) *holder {
	t.Helper()
	cmd := exec.Command(python, "testdata/holder.py", strconv.Itoa(gib))
	cmd.Stderr = testWriter{t}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		defer close(h.lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			h.lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

func (h *holder) expect(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("holder exited before printing %q", prefix)
			}
			t.Logf("holder: %s", line)
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-deadline:
			t.Fatalf("holder printed no %q within %s", prefix, within)
		}
	}
}

func (h *holder) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := io.WriteString(h.in, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
}

func suspendOnce(t *testing.T, lib *Library, python string, gib int) string {
	h := startHolder(t, python, gib)
	h.expect(t, "ready", 5*time.Minute)
	pid := h.cmd.Process.Pid
	gpuBefore := gpuMiB(t, pid)
	rssBefore := gputest.VmRSSMiB(pid)

	st, err := Suspend(lib, pid, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := lib.State(pid); err != nil || s != Checkpointed {
		t.Fatalf("state after Suspend = %s, %v; want checkpointed", s, err)
	}
	gpuSuspended := gpuMiB(t, pid)
	rssSuspended := gputest.VmRSSMiB(pid)
	if gpuSuspended > 0 && gpuSuspended*10 > gpuBefore {
		t.Errorf("suspended process still holds %d of its %d GPU MiB", gpuSuspended, gpuBefore)
	}

	rt, err := Resume(lib, pid)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := lib.State(pid); err != nil || s != Running {
		t.Fatalf("state after Resume = %s, %v; want running", s, err)
	}
	gpuResumed := gpuMiB(t, pid)
	rssResumed := gputest.VmRSSMiB(pid)
	h.send(t, "verify")
	verdict := h.expect(t, "", 5*time.Minute)
	if !strings.HasPrefix(verdict, "intact") {
		t.Errorf("after resume the holder says %q", verdict)
	}
	h.send(t, "exit")
	rate := func(d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(gib)/d.Seconds())
	}
	row := fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s | %d / %d / %d | %d / %d / %d | %s |",
		gib, st.Lock.Round(time.Millisecond), st.Checkpoint.Round(time.Millisecond), rate(st.Checkpoint),
		rt.Restore.Round(time.Millisecond), rate(rt.Restore), rt.Unlock.Round(time.Millisecond),
		gpuBefore, gpuSuspended, gpuResumed, rssBefore, rssSuspended, rssResumed, verdict)
	t.Log(row)
	return row
}

// gpuMiB is the GPU memory NVML counts for pid: 0 when it lists none, -1
// when it cannot tell.
func gpuMiB(t *testing.T, pid int) int64 {
	mib, _, err := gputest.ProcessGPUMemoryMiB(pid)
	if err != nil {
		t.Logf("NVML cannot count pid %d's GPU memory: %v", pid, err)
		return -1
	}
	return mib
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
