package device

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/lease"
)

// fakeGPULeases is a GPULeaseReader over a map.
type fakeGPULeases map[string]*lease.GPULease

func (f fakeGPULeases) GPULease(_ context.Context, id string) (*lease.GPULease, error) {
	return f[id], nil
}

func leased(job string, ids ...string) fakeGPULeases {
	m := fakeGPULeases{}
	for _, id := range ids {
		m[id] = &lease.GPULease{Namespace: "research", JobID: job, GPU: id}
	}
	return m
}

// mountPlugin is a plugin over the eight-GPU fixture with checkpoint
// mounts under a fresh root, leases from f.
func mountPlugin(t *testing.T, f fakeGPULeases) (*Plugin, string) {
	t.Helper()
	root, err := os.MkdirTemp("", "themis-ckpt-")
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	must.NoError(t, os.Chmod(root, 0o711))
	impl := NewPlugin(hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: testWriter{t}}))
	impl.leaseOverride = f
	dp := serve(t, impl)
	path := copyFixture(t, "eight-gpu.hcl")
	must.NoError(t, dp.SetConfig(agentConfig(t, `topology_file = "`+path+`"
checkpoint_root = "`+root+`"`)))
	return impl, root
}

// TestReserveMountsTheJobsOwnDir: Reserve mounts the dir of the job the
// GPUs are leased to, and only it, at /themis-checkpoints; on the host it
// is below root-only dirs, so no other process of the node reaches it by
// its path. Before: the planner mounted the whole checkpoint root into
// every exec and docker themis task (a host volume), every job's dirs in
// it.
func TestReserveMountsTheJobsOwnDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the dirs are root's; run as root")
	}
	impl, root := mountPlugin(t, leased("train/v2", "SIM-dgx-0-1", "SIM-dgx-0-2"))
	res, err := impl.Reserve([]string{"SIM-dgx-0-1", "SIM-dgx-0-2"})
	must.NoError(t, err)
	must.Len(t, 1, res.Mounts)
	m := res.Mounts[0]
	want := filepath.Join(root, ".themis", "jobs", "research", "train%2Fv2")
	must.Eq(t, CheckpointMount, m.TaskPath)
	must.Eq(t, want, m.HostPath)
	must.Eq(t, want, JobCheckpointDir(root, "research", "train/v2"))
	must.False(t, m.ReadOnly)
	for p, mode := range map[string]os.FileMode{
		filepath.Join(root, ".themis"): 0o700, filepath.Join(root, ".themis", "jobs"): 0o700,
		filepath.Join(root, ".themis", "jobs", "research"): 0o700, want: 0o777,
	} {
		fi, err := os.Lstat(p)
		must.NoError(t, err)
		must.Eq(t, mode, fi.Mode().Perm(), must.Sprint(p))
		must.Eq(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, must.Sprint(p))
	}
	// Another job's process, as any user but root, cannot reach it.
	probe := exec.Command("/bin/sh", "-c", "ls "+want)
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := probe.CombinedOutput()
	must.Error(t, err, must.Sprintf("nobody listed %s: %s", want, out))
	must.StrContains(t, string(out), "Permission denied")
}

func TestReserveCheckpointMountCases(t *testing.T) {
	cases := []struct {
		name    string
		leases  fakeGPULeases
		ids     []string
		plant   func(root string) error
		mounts  int
		wantErr string
	}{
		{"no lease: no mount", fakeGPULeases{}, []string{"SIM-dgx-0-1"}, nil, 0, ""},
		{"two jobs' GPUs", func() fakeGPULeases {
			f := leased("a", "SIM-dgx-0-1")
			f["SIM-dgx-0-2"] = &lease.GPULease{Namespace: "research", JobID: "b"}
			return f
		}(), []string{"SIM-dgx-0-1", "SIM-dgx-0-2"}, nil, 0, "leased to two jobs (research/a and research/b)"},
		{"namespace dir planted as a symlink", leased("a", "SIM-dgx-0-1"), []string{"SIM-dgx-0-1"}, func(root string) error {
			if err := os.MkdirAll(filepath.Join(root, ".themis", "jobs"), 0o700); err != nil {
				return err
			}
			return os.Symlink("/etc", filepath.Join(root, ".themis", "jobs", "research"))
		}, 0, "is a symlink"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if os.Geteuid() != 0 {
				t.Skip("the dirs are root's; run as root")
			}
			impl, root := mountPlugin(t, c.leases)
			if c.plant != nil {
				must.NoError(t, c.plant(root))
			}
			res, err := impl.Reserve(c.ids)
			if c.wantErr != "" {
				must.ErrorContains(t, err, c.wantErr)
				return
			}
			must.NoError(t, err)
			must.Len(t, c.mounts, res.Mounts)
		})
	}
}

// Without checkpoint_root the plugin mounts nothing and reads no lease.
func TestReserveNoCheckpointRoot(t *testing.T) {
	dp := configured(t, `topology_file = "`+copyFixture(t, "eight-gpu.hcl")+`"`)
	res, err := dp.Reserve([]string{"SIM-dgx-0-1"})
	must.NoError(t, err)
	must.SliceEmpty(t, res.Mounts)
	_, _, err = decodeConfig(agentConfig(t, `checkpoint_root = "relative/dir"`).PluginConfig)
	must.ErrorContains(t, err, `checkpoint_root: must be an absolute path, got "relative/dir"`)
}
