package driver

import (
	"fmt"
	"os"
	"testing"
)

// moduleDir is the package dir the tests started in (go build needs it).
var moduleDir string

// TestMain runs the tests from a scratch dir: on cgroups v1 an executor
// given a task without cgroups (only tests do that; Nomad always gives one)
// writes its pid to "cgroup.procs" in its working directory, which is the
// test's.
func TestMain(m *testing.M) {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	moduleDir = wd
	scratch, err := os.MkdirTemp("", "themis-driver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.Chdir(scratch); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.Chdir(wd)
	_ = os.RemoveAll(scratch)
	os.Exit(code)
}
