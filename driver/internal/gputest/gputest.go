// Package gputest holds what the real-GPU tests of the driver share: finding
// a Python that runs PyTorch on CUDA, and reading a process's GPU memory
// through NVML. Those tests skip, saying why, where either is missing (CI
// has no GPU); they run on a machine with an NVIDIA GPU (docs/nvml.md,
// "On a real GPU").
package gputest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// EnvTorchPython names the Python interpreter to run PyTorch jobs with;
// without it, TorchPython tries /opt/torch/.venv/bin/python3 and python3 on
// PATH.
const EnvTorchPython = "THEMIS_TORCH_PYTHON"

// TorchPython returns the path of a Python interpreter that imports torch
// and sees a CUDA device, or "" and why there is none.
func TorchPython() (path, why string) {
	candidates := []string{os.Getenv(EnvTorchPython), "/opt/torch/.venv/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	var tried []string
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(c); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, c, "-c",
			"import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)").CombinedOutput()
		cancel()
		if err == nil {
			return c, ""
		}
		tried = append(tried, fmt.Sprintf("%s: %v %s", c, err, lastLine(out)))
	}
	if len(tried) == 0 {
		return "", "no python3 found (set " + EnvTorchPython + ")"
	}
	return "", "no Python runs PyTorch on CUDA here (" + strings.Join(tried, "; ") + ")"
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// VmRSSMiB is a process's resident memory in MiB, from /proc/<pid>/status,
// or -1 when it cannot be read.
func VmRSSMiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb >> 10
			}
		}
	}
	return -1
}
