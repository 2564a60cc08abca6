package driver

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/planner/spec"
)

// nvidiaMajor is the character major number of the NVIDIA driver's GPU
// device files (/dev/nvidia<minor>, /dev/nvidiactl = 195:255,
// /dev/nvidia-modeset = 195:254).
const nvidiaMajor = 195

// fakeGPUFiles are device files with the numbers of a node's NVIDIA ones,
// made with mknod in a directory of the test's: four GPUs, nvidiactl,
// nvidia-modeset, and nvidia-uvm, nvidia-uvm-tools and two MIG instances'
// capability files on character majors no driver holds on this host (the
// real ones are dynamic). Without an NVIDIA driver an open that the device
// cgroup lets through fails with ENXIO (no driver for the number), one it
// refuses with EPERM. On a host with the driver a let-through GPU file
// reaches it: it opens where that minor is a GPU, and fails with ENODEV
// where it is not (seen on a one-GPU H200, docs/nvml.md).
type fakeGPUFiles struct {
	dir   string
	paths map[string]string // by name relative to dir ("nvidia0", "nvidia-caps/nvidia-cap1")
}

func (f fakeGPUFiles) path(name string) string { return f.paths[name] }

// names are the files' names, sorted.
func (f fakeGPUFiles) names() []string {
	return slices.Sorted(maps.Keys(f.paths))
}

// reserved is what Nomad hands the driver for a task the device plugin
// reserved names for (TaskConfig.Devices, from Reserve's DeviceSpecs:
// host path, task path, cgroup permissions "rw").
func (f fakeGPUFiles) reserved(names ...string) []*drivers.DeviceConfig {
	var out []*drivers.DeviceConfig
	for _, n := range names {
		out = append(out, &drivers.DeviceConfig{HostPath: f.path(n), TaskPath: f.path(n), Permissions: "rw"})
	}
	return out
}

// freeCharMajors returns n character major numbers no driver holds on this
// host (/proc/devices), from the top of the dynamic range down.
func freeCharMajors(t *testing.T, n int) []uint32 {
	t.Helper()
	f, err := os.Open("/proc/devices")
	must.NoError(t, err)
	defer f.Close()
	used := map[uint32]bool{nvidiaMajor: true}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Block") {
			break
		}
		if fields := strings.Fields(line); len(fields) == 2 {
			if m, err := strconv.ParseUint(fields[0], 10, 32); err == nil {
				used[uint32(m)] = true
			}
		}
	}
	var out []uint32
	for m := uint32(511); m > 233 && len(out) < n; m-- {
		if !used[m] {
			out = append(out, m)
		}
	}
	must.Eq(t, n, len(out), must.Sprint("free character majors"))
	return out
}

// makeFakeGPUFiles mknods fakeGPUFiles in a directory every user can
// reach, removed at cleanup.
func makeFakeGPUFiles(t *testing.T) fakeGPUFiles {
	t.Helper()
	dir, err := os.MkdirTemp("", "themis-dev-")
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	must.NoError(t, os.Chmod(dir, 0o755))
	must.NoError(t, os.Mkdir(filepath.Join(dir, "nvidia-caps"), 0o755))
	majors := freeCharMajors(t, 2)
	uvm, caps := majors[0], majors[1]
	nodes := map[string][2]uint32{
		"nvidia0": {nvidiaMajor, 0}, "nvidia1": {nvidiaMajor, 1}, "nvidia2": {nvidiaMajor, 2}, "nvidia3": {nvidiaMajor, 3},
		"nvidiactl": {nvidiaMajor, 255}, "nvidia-modeset": {nvidiaMajor, 254},
		"nvidia-uvm": {uvm, 0}, "nvidia-uvm-tools": {uvm, 1},
		// Two MIG instances of GPU 0: their GPU and compute instances'
		// access files.
		"nvidia-caps/nvidia-cap21": {caps, 21}, "nvidia-caps/nvidia-cap22": {caps, 22},
		"nvidia-caps/nvidia-cap30": {caps, 30}, "nvidia-caps/nvidia-cap31": {caps, 31},
	}
	f := fakeGPUFiles{dir: dir, paths: map[string]string{}}
	for name, mm := range nodes {
		p := filepath.Join(dir, name)
		must.NoError(t, unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(mm[0], mm[1]))), must.Sprint(p))
		must.NoError(t, os.Chmod(p, 0o666)) // past the umask
		f.paths[name] = p
	}
	return f
}

// openScript tries to open each path read-write and prints one line per
// path: "<path>: ok" or "<path>: <the shell's error, with strerror>".
func openScript(paths ...string) string {
	var b strings.Builder
	b.WriteString(`for f in`)
	for _, p := range paths {
		b.WriteString(" '" + p + "'")
	}
	b.WriteString(`; do if out=$( { : 3<>"$f"; } 2>&1 ); then echo "$f: ok"; else echo "$f: $out"; fi; done; echo ` + opensDone)
	return b.String()
}

// opensDone is openScript's last line: a test reads the task's log until
// it is there (the log is copied while the test reads it).
const opensDone = "opens-done"

// openResults parses openScript's output: path -> "ok", "EPERM", "ENXIO",
// "ENODEV" or the whole error.
func openResults(out string) map[string]string {
	res := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		path, msg, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		lower := strings.ToLower(msg) // the shell's strerror is capitalised, Go's is not
		switch {
		case msg == "ok":
		case strings.Contains(lower, unix.EPERM.Error()):
			msg = "EPERM"
		case strings.Contains(lower, unix.ENXIO.Error()):
			msg = "ENXIO" // before ENODEV, whose text is a prefix of it
		case strings.Contains(lower, unix.ENODEV.Error()):
			msg = "ENODEV"
		}
		res[path] = msg
	}
	return res
}

// defaultDevices are device files every process needs, which a task keeps
// (runc's default allow list): each must open.
var defaultDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/ptmx"}

// fenceCases are the reservations the device fence tests run: what the
// device plugin's Reserve gave a task, by fakeGPUFiles name.
var fenceCases = []struct {
	name     string
	reserved []string
}{
	{"two GPUs of four", []string{"nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}},
	{"one MIG instance", []string{"nvidia0", "nvidia-caps/nvidia-cap21", "nvidia-caps/nvidia-cap22", "nvidiactl", "nvidia-uvm"}},
	{"no GPUs", nil},
}

// TestGPUDeviceIsolation: a task opens its own GPUs' device files (and the
// shared NVIDIA ones, and its MIG instance's capability files: what the
// device plugin's Reserve gave it) and gets EPERM on every other GPU's;
// the device files every process needs still open. Run as root on cgroups
// v1 (the devices controller) or v2 (an eBPF device program), with device
// nodes mknod'ed with NVIDIA's numbers.
func TestGPUDeviceIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod of the fake GPU device files, and a driver that can fence devices")
	}
	if cgroupslib.GetMode() == cgroupslib.OFF {
		t.Skip("cgroups are off on this host: the driver cannot fence a task's devices")
	}
	if _, err := user.Lookup(DefaultTaskUser); err != nil {
		t.Skipf("no user %q to run the task as: %v", DefaultTaskUser, err)
	}
	gpus := makeFakeGPUFiles(t)
	for _, c := range fenceCases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, false, nil)
			runAsNobody(t, e)
			task, tc := newTask("devices", openAll(gpus), spec.Stanza{GPUs: 1})
			task.Devices = gpus.reserved(c.reserved...)
			_, err := e.start(t, task, tc, true)
			must.NoError(t, err)
			must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
			out := readEventually(t, filepath.Join(task.TaskDir().LogDir, "devices.stdout.0"), opensDone)
			t.Logf("opens by a task reserved %v:\n%s", c.reserved, out)
			checkOpens(t, out, gpus, c.reserved)
			must.NoError(t, e.h.DestroyTask(task.ID, false))
			noDeviceCgroup(t, task)
		})
	}
}

// noDeviceCgroup checks that the v1 devices cgroup the driver made for a
// task is gone once the task is destroyed.
func noDeviceCgroup(t *testing.T, task *drivers.TaskConfig) {
	t.Helper()
	if cgroupslib.GetMode() != cgroupslib.CG1 {
		return
	}
	_, err := os.Stat(deviceCgroupV1(task))
	must.True(t, os.IsNotExist(err), must.Sprintf("devices cgroup %s left behind: %v", deviceCgroupV1(task), err))
}

// checkOpens checks openScript's output for defaultDevices and every fake
// GPU file: the default ones open, the reserved ones are let through, the
// others refused with EPERM.
func checkOpens(t *testing.T, out string, gpus fakeGPUFiles, reserved []string) {
	t.Helper()
	got := openResults(out)
	for _, p := range defaultDevices {
		must.Eq(t, "ok", got[p], must.Sprintf("%s must open\n%s", p, out))
	}
	for _, n := range gpus.names() {
		p := gpus.path(n)
		if slices.Contains(reserved, n) {
			// Let through: opened, no driver for the number, or (where the
			// NVIDIA driver is loaded) no GPU at that minor.
			must.True(t, got[p] == "ok" || got[p] == "ENXIO" || got[p] == "ENODEV", must.Sprintf("%s is the task's: want it let through, got %q\n%s", n, got[p], out))
		} else {
			must.Eq(t, "EPERM", got[p], must.Sprintf("%s is not the task's\n%s", n, out))
		}
	}
}

// openAll is openScript over defaultDevices and every fake GPU file.
func openAll(gpus fakeGPUFiles) string {
	paths := slices.Clone(defaultDevices)
	for _, n := range gpus.names() {
		paths = append(paths, gpus.path(n))
	}
	return openScript(paths...)
}

// runAsNobody has e's driver run tasks as nobody, with a checkpoint root
// and alloc dirs nobody can reach.
func runAsNobody(t *testing.T, e *testEnv) {
	t.Helper()
	root, err := os.MkdirTemp("", "themis-ckpt-")
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	must.NoError(t, os.Chmod(root, 0o711))
	cfg, _ := e.d.current()
	cfg.CheckpointRoot, cfg.DefaultUser = root, DefaultTaskUser
	var data []byte
	must.NoError(t, base.MsgPackEncode(&data, &cfg))
	must.NoError(t, e.h.SetConfig(&base.Config{PluginConfig: data}))
	e.ckptDir = root
	e.openAllocDirs = true
}

// TestTaskDeviceRules: a task's allow list is runc's defaults, the device
// files reserved for it (their type and numbers, with the reservation's
// permissions, "rw" when it gives none) and the operator's allow_devices;
// anything that is not a device file is refused, naming it.
func TestTaskDeviceRules(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod of the fake GPU device files")
	}
	gpus := makeFakeGPUFiles(t)
	regular := filepath.Join(t.TempDir(), "not-a-device")
	must.NoError(t, os.WriteFile(regular, nil, 0o644))
	link := filepath.Join(t.TempDir(), "nvidia1-link")
	must.NoError(t, os.Symlink(gpus.path("nvidia1"), link))
	defaults := len(specconv.AllowedDevices)
	cases := []struct {
		name     string
		reserved []*drivers.DeviceConfig
		allow    []string
		want     []string // the rules past runc's defaults, as devices.allow lines
		err      string
	}{
		{"nothing reserved", nil, nil, nil, ""},
		{"a GPU and nvidiactl", gpus.reserved("nvidia2", "nvidiactl"), nil, []string{"c 195:2 rw", "c 195:255 rw"}, ""},
		{"permissions as given", []*drivers.DeviceConfig{{HostPath: gpus.path("nvidia3"), Permissions: "r"}}, nil, []string{"c 195:3 r"}, ""},
		{"no permissions: rw", []*drivers.DeviceConfig{{HostPath: gpus.path("nvidia3")}}, nil, []string{"c 195:3 rw"}, ""},
		{"bad permissions", []*drivers.DeviceConfig{{HostPath: gpus.path("nvidia3"), Permissions: "rwx"}}, nil, nil,
			`device ` + gpus.path("nvidia3") + ` reserved for the task: cgroup permissions "rwx"`},
		{"a regular file", []*drivers.DeviceConfig{{HostPath: regular, Permissions: "rw"}}, nil, nil,
			"device " + regular + " reserved for the task: "},
		{"a symlink is not followed", []*drivers.DeviceConfig{{HostPath: link, Permissions: "rw"}}, nil, nil,
			"device " + link + " reserved for the task: "},
		{"a missing file", []*drivers.DeviceConfig{{HostPath: "/dev/no-such-themis-device", Permissions: "rw"}}, nil, nil,
			"device /dev/no-such-themis-device reserved for the task: "},
		{"allow_devices: a directory", nil, []string{filepath.Join(gpus.dir, "nvidia-caps")}, []string{
			"c " + capsMajor(t, gpus) + ":21 rw", "c " + capsMajor(t, gpus) + ":22 rw", "c " + capsMajor(t, gpus) + ":30 rw", "c " + capsMajor(t, gpus) + ":31 rw"}, ""},
		{"allow_devices: a file", nil, []string{gpus.path("nvidia0")}, []string{"c 195:0 rw"}, ""},
		{"allow_devices: missing on this node", nil, []string{"/dev/infiniband-no-such-themis"}, nil, ""},
		{"allow_devices: not a device", nil, []string{regular}, nil, "allow_devices: " + regular + ": "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules, err := taskDeviceRules(c.reserved, c.allow)
			if c.err != "" {
				must.ErrorContains(t, err, c.err)
				return
			}
			must.NoError(t, err)
			must.Eq(t, defaults+len(c.want), len(rules))
			var got []string
			for _, r := range rules[defaults:] {
				must.True(t, r.Allow)
				got = append(got, r.CgroupString())
			}
			slices.Sort(got)
			must.Eq(t, c.want, got)
		})
	}
}

// capsMajor is the major number makeFakeGPUFiles gave the MIG capability
// files.
func capsMajor(t *testing.T, gpus fakeGPUFiles) string {
	t.Helper()
	var st unix.Stat_t
	must.NoError(t, unix.Lstat(gpus.path("nvidia-caps/nvidia-cap21"), &st))
	return strconv.FormatUint(uint64(unix.Major(st.Rdev)), 10)
}

func TestConfig_AllowDevices(t *testing.T) {
	base := Config{CheckpointRoot: "/x", KeepCheckpoints: 1}
	for _, c := range []struct {
		allow []string
		err   string
	}{
		{nil, ""},
		{[]string{"/dev/infiniband", "/dev/fuse"}, ""},
		{[]string{"dev/fuse"}, `allow_devices: want absolute paths of device files or directories, got "dev/fuse"`},
	} {
		cfg := base
		cfg.AllowDevices = c.allow
		if c.err == "" {
			must.NoError(t, cfg.validate())
		} else {
			must.EqError(t, cfg.validate(), c.err)
		}
	}
}

// TestDeviceCgroupGoneAtExit: the v1 devices cgroup of a task that exits
// goes with its executor, before and without DestroyTask, which Nomad
// does not always call (a client shutting down just after a task ended
// left one behind in the e2e suite's fault tests).
func TestDeviceCgroupGoneAtExit(t *testing.T) {
	if ok, why := deviceIsolation(); !ok || cgroupslib.GetMode() != cgroupslib.CG1 {
		t.Skipf("the driver makes devices cgroups only on cgroups v1 when it can fence devices (here: %s, fence: %v %s)", cgroupsMode(), ok, why)
	}
	e := newTestEnv(t, false, nil)
	task, tc := newTask("exits", `test -d "$FENCE" && echo fenced`, spec.Stanza{GPUs: 1})
	task.Env["FENCE"] = deviceCgroupV1(task)
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
	readEventually(t, filepath.Join(task.TaskDir().LogDir, "exits.stdout.0"), "fenced")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(deviceCgroupV1(task)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("devices cgroup %s still there 5s after the task exited", deviceCgroupV1(task))
		}
	}
}

// TestSweepDeviceCgroupsV1: the fingerprint's sweep removes the devices
// cgroup of a task that is over (its freezer cgroup gone, none of its
// processes left) and no other: not one whose task's cgroups the client
// still has (a task being started or running), nor one a process is in.
func TestSweepDeviceCgroupsV1(t *testing.T) {
	if ok, why := deviceIsolation(); !ok || cgroupslib.GetMode() != cgroupslib.CG1 {
		t.Skipf("the driver makes devices cgroups only on cgroups v1 when it can fence devices (here: %s, fence: %v %s)", cgroupsMode(), ok, why)
	}
	e := newTestEnv(t, false, nil)
	must.NoError(t, e.d.ensureCgroupParents())
	cases := []struct {
		name    string
		freezer bool // the client still has the task's freezer cgroup
		process bool // a process is in the devices cgroup
		removed bool
	}{
		{"task over", false, false, true},
		{"task the client's still", true, false, false},
		{"a process left in it", false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task, _ := newTask("sweep", "", spec.Stanza{GPUs: 1})
			dir := deviceCgroupV1(task)
			must.NoError(t, os.Mkdir(dir, 0o755))
			t.Cleanup(func() { _ = os.Remove(dir) })
			if c.freezer {
				fz := cgroupslib.PathCG1(task.AllocID, task.Name, "freezer")
				must.NoError(t, os.Mkdir(fz, 0o755))
				t.Cleanup(func() { _ = os.Remove(fz) })
			}
			if c.process {
				cmd := exec.Command("sleep", "30")
				must.NoError(t, cmd.Start())
				t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				must.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
			}
			gone := sweepDeviceCgroupsV1()
			_, err := os.Stat(dir)
			must.Eq(t, c.removed, os.IsNotExist(err), must.Sprintf("%s: stat %v", dir, err))
			must.Eq(t, c.removed, slices.Contains(gone, dir))
		})
	}
}

// TestOpenResults: the shell's error texts map to the errnos the fence
// tests tell apart; ENXIO's text begins with ENODEV's.
func TestOpenResults(t *testing.T) {
	out := "/a: ok\n/b: /bin/sh: 1: cannot create /b: Operation not permitted\n" +
		"/c: /bin/sh: 1: cannot create /c: No such device or address\n/d: /bin/sh: 1: cannot create /d: No such device\n" +
		"/e: /bin/sh: 1: cannot create /e: Is a directory"
	got := openResults(out)
	want := map[string]string{"/a": "ok", "/b": "EPERM", "/c": "ENXIO", "/d": "ENODEV", "/e": "/bin/sh: 1: cannot create /e: Is a directory"}
	must.Eq(t, want, got)
}
