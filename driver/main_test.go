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
// (taskCgroups) and remove them, and the driver makes the client's cgroup
// parents where no client has run. Those stay, as a client leaves them:
// they are the node's, shared with every Nomad client on it, and the
// executor (this binary, whose init serves it before any test code runs)
// always uses the default parent (/nomad on v1). Removing the ones this
// binary made, when empty at its end, failed the Nomad clients of the e2e
// suite that `go test ./...` ran at the same time: their parents went
// between their start and their first allocation ("cpuparts_hook failed:
// ... open /sys/fs/cgroup/cpuset/nomad/share/cpuset.cpus: no such file or
// directory", TestACL and TestAPI).
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
