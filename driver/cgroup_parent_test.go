package driver

import (
	"os"
	"testing"

	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// useCgroupParent points this process's Nomad code (cgroupslib, the driver)
// at a cgroup parent of the test's own, so the test can meet a host where
// it is missing without touching the real one, which a Nomad client may be
// using. It is restored, and what the test made under it removed, at
// cleanup.
func useCgroupParent(t *testing.T, name string) {
	t.Helper()
	old := cgroupslib.NomadCgroupParent
	cgroupslib.NomadCgroupParent = name
	t.Cleanup(func() {
		dirs := cgroupParentDirs(cgroupslib.GetMode(), name)
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
		cgroupslib.NomadCgroupParent = old
	})
}

// TestCgroupParentMissing: on a host where no Nomad client has made its
// cgroup parents, the driver makes them as the client does and is healthy;
// where it cannot, its fingerprint is unhealthy saying why, and StartTask
// fails with the same reason rather than the executor's "open
// .../freezer/nomad/cgroup.procs: no such file or directory".
func TestCgroupParentMissing(t *testing.T) {
	if os.Geteuid() != 0 || cgroupslib.GetMode() == cgroupslib.OFF {
		t.Skip("the driver makes cgroup parents only as root with cgroups on (the executor applies none otherwise)")
	}
	suffix := ""
	if cgroupslib.GetMode() == cgroupslib.CG2 {
		suffix = ".slice"
	}
	cases := []struct {
		name   string
		parent string
		// err is in the fingerprint's health description and StartTask's
		// error; "" for a healthy driver that made the parent.
		err string
	}{
		{"missing parent is made", "themis-test-" + uuid.Short() + suffix, ""},
		// Under a cgroup's interface file: mkdir fails with ENOTDIR.
		{"parent that cannot be made", "cgroup.procs/themis-test" + suffix, "is missing and cannot be made"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			useCgroupParent(t, c.parent)
			must.SliceNotEmpty(t, missingCgroupParents())
			e := newTestEnv(t, false, nil)

			fp := e.d.buildFingerprint(t.Context())
			if c.err == "" {
				must.Eq(t, drivers.HealthStateHealthy, fp.Health, must.Sprint(fp.HealthDescription))
				must.SliceEmpty(t, missingCgroupParents())
				return
			}
			must.Eq(t, drivers.HealthStateUnhealthy, fp.Health)
			must.StrContains(t, fp.HealthDescription, "tasks cannot start: cgroup parent")
			must.StrContains(t, fp.HealthDescription, c.err)

			task, tc := newTask("parent", `exit 0`, spec.Stanza{GPUs: 1})
			t.Cleanup(e.h.MkAllocDir(task, false))
			must.NoError(t, task.EncodeConcreteDriverConfig(&tc))
			_, _, err := e.h.StartTask(task)
			must.ErrorContains(t, err, c.err)
		})
	}
}
