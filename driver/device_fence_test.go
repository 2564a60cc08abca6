package driver

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// cgroup2Mount is where a cgroup2 hierarchy is mounted on this host: the
// cgroup root on cgroups v2, /sys/fs/cgroup/unified on a hybrid v1 host;
// "" where there is none.
func cgroup2Mount(t testing.TB) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	must.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if ok && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return fields[4]
		}
	}
	return ""
}

// TestDeviceFenceV2: the cgroups v2 fence (runc's eBPF device program,
// attached to a cgroup) refuses a process born in that cgroup every GPU
// device file but its own, and leaves it the default ones. The driver
// takes this path on a cgroups v2 client (TestGPUDeviceIsolation runs it
// through StartTask there); this test runs it wherever a cgroup2
// hierarchy is mounted, including the unified one of a hybrid v1 host,
// whose device programs the kernel runs alongside the v1 controller.
func TestDeviceFenceV2(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod, a cgroup of the test's own, and bpf(2)")
	}
	mount := cgroup2Mount(t)
	if mount == "" {
		t.Skip("no cgroup2 hierarchy is mounted on this host")
	}
	nobody, err := user.Lookup(DefaultTaskUser)
	if err != nil {
		t.Skipf("no user %q to run the process as: %v", DefaultTaskUser, err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	gpus := makeFakeGPUFiles(t)
	// run runs openAll as nobody, born in a new cgroup (as the executor
	// starts a task) fenced to reserved, or not fenced at all.
	run := func(t *testing.T, fenced bool, reserved []string) string {
		dir := filepath.Join(mount, "themis-test-"+uuid.Short())
		must.NoError(t, os.Mkdir(dir, 0o755))
		t.Cleanup(func() { _ = os.Remove(dir) })
		if fenced {
			rules, err := taskDeviceRules(gpus.reserved(reserved...), nil)
			must.NoError(t, err)
			fence := &deviceFence{mode: cgroupslib.CG2, dir: dir, rules: rules}
			must.NoError(t, fence.apply())
			// Applied again (a restarted task's cgroup): runc replaces
			// its program rather than stacking a second.
			must.NoError(t, fence.apply())
		}
		cg, err := os.Open(dir)
		must.NoError(t, err)
		defer cg.Close()
		cmd := exec.Command("/bin/sh", "-c", openAll(gpus))
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{
			UseCgroupFD: true, CgroupFD: int(cg.Fd()),
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		must.NoError(t, cmd.Run(), must.Sprint(out.String()))
		t.Logf("opens by a process reserved %v, fenced %v:\n%s", reserved, fenced, out.String())
		return out.String()
	}
	t.Run("not fenced", func(t *testing.T) {
		// What the fence takes away: every GPU's file is let through.
		out := run(t, false, nil)
		got := openResults(out)
		for _, n := range gpus.names() {
			must.NotEq(t, "EPERM", got[gpus.path(n)], must.Sprintf("%s\n%s", n, out))
		}
	})
	for _, c := range fenceCases {
		t.Run(c.name, func(t *testing.T) {
			checkOpens(t, run(t, true, c.reserved), gpus, c.reserved)
		})
	}
}

// BenchmarkDeviceFence: what fencing adds to a task's start, per cgroups
// version: making the cgroup (v1), setting the rules of a task reserved
// two GPUs and the shared files, and removing the cgroup; the v2 case
// runs where a cgroup2 hierarchy is mounted (the unified one here).
//
//	go test ./driver/ -run '^$' -bench DeviceFence -benchtime 200x
func BenchmarkDeviceFence(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: cgroups of the benchmark's own")
	}
	rules, err := taskDeviceRules([]*drivers.DeviceConfig{
		{HostPath: "/dev/null", Permissions: "rw"}, {HostPath: "/dev/zero", Permissions: "rw"}, {HostPath: "/dev/full", Permissions: "rw"},
	}, nil)
	must.NoError(b, err)
	for _, c := range []struct {
		name  string
		mode  cgroupslib.Mode
		under string
	}{
		{"v1", cgroupslib.CG1, devicesControllerV1()},
		{"v2", cgroupslib.CG2, cgroup2Mount(b)},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := os.Stat(filepath.Join(c.under, "cgroup.procs")); c.under == "" || err != nil {
				b.Skipf("no %s hierarchy here", c.name)
			}
			for i := 0; b.Loop(); i++ {
				dir := filepath.Join(c.under, "themis-bench-"+strconv.Itoa(i))
				if c.mode == cgroupslib.CG2 {
					must.NoError(b, os.Mkdir(dir, 0o755)) // the client's, on v2
				}
				f := &deviceFence{mode: c.mode, dir: dir, rules: rules}
				must.NoError(b, f.apply())
				must.NoError(b, os.Remove(dir))
			}
		})
	}
}
