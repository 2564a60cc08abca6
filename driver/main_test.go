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
// test's. The tests give tasks their cgroups as the Nomad client does
// (taskCgroups), and the driver makes the client's cgroup parents where no
// client has run: those that were missing when the tests began are removed
// when they end (where still empty: a Nomad client or another test binary
// may have put tasks there since).
func TestMain(m *testing.M) {
	made := missingCgroupParents()
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
	for i := len(made) - 1; i >= 0; i-- {
		_ = os.Remove(made[i]) // a cgroup dir goes only while it has no tasks and no children
	}
	os.Exit(code)
}
