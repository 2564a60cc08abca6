package e2e

import (
	"fmt"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/nomad"
)

// Held jobs across Nomad's garbage collection (docs/design.md, "Held
// jobs"): a job queued behind a running one and a job suspended by a
// preemption are both held by the planner (dead at count 0 in the pending
// pool, their held version tagged themis-held), and an operator's `nomad
// system gc`, which purges a finished job at once, keeps both. When the
// suspended job resumes, the pin restores its count and removes the tag,
// so Nomad can collect it once it has finished.
func TestHeldJobsSurviveNomadGC(t *testing.T) {
	usePolicy(t, "fitgpp")
	done, be, queued, te := "e2e-held-done", "e2e-held-be", "e2e-held-queued", "e2e-held-te"
	// A job that ran and finished: what the GC collects.
	trainJob{gpus: 8, steps: 3}.run(t, done)
	waitDead(t, done, 90*time.Second)

	trainJob{gpus: 8, grace: "5s", steps: 3000}.run(t, be)
	waitRunning(t, be, 60*time.Second)
	trainJob{gpus: 8, steps: 30}.run(t, queued)
	waitHeld(t, queued, "queued: held by the themis planner", 30*time.Second)
	trainJob{gpus: 8, class: "te", steps: 200}.run(t, te)
	waitLeaseOf(t, te, 60*time.Second)
	waitHeld(t, be, "suspended: preempted by", 60*time.Second)
	for _, id := range []string{be, queued} {
		t.Logf("before nomad system gc: %s", nomadShows(t, id))
		if st := jobStatus(t, id); st == nil || st.Held == "" {
			t.Errorf("%s's status %+v: want it to say how it is held", id, st)
		}
	}

	if err := env.nomad.System().GarbageCollect(); err != nil {
		t.Fatalf("nomad system gc: %v", err)
	}
	eventually(t, 30*time.Second, "the GC to collect "+done, func() (bool, error) {
		_, _, err := env.nomad.Jobs().Info(done, nil)
		return err != nil, fmt.Errorf("%s still in Nomad", done)
	})
	for _, id := range []string{be, queued} {
		t.Logf("after nomad system gc: %s", nomadShows(t, id))
		j, _, err := env.nomad.Jobs().Info(id, nil)
		if err != nil {
			t.Fatalf("%s held, and collected by nomad system gc: %v", id, err)
		}
		if *j.Status != "dead" || *j.TaskGroups[0].Count != 0 {
			t.Errorf("%s after the GC: status %s, count %d; want dead at count 0 (held)", id, *j.Status, *j.TaskGroups[0].Count)
		}
	}

	// The TE job ends: the suspended job resumes (first in FIFO order),
	// its count restored and its tag removed; the queued one stays held.
	waitRunning(t, be, 90*time.Second)
	eventually(t, 30*time.Second, be+"'s tag to be removed", func() (bool, error) {
		v, ok := taggedVersion(t, be)
		return !ok, fmt.Errorf("version %d still tagged", v)
	})
	if j, _, err := env.nomad.Jobs().Info(be, nil); err != nil || *j.TaskGroups[0].Count != 1 {
		t.Errorf("%s resumed: %v, count %v; want count 1", be, err, j.TaskGroups[0].Count)
	}
	if _, ok := taggedVersion(t, queued); !ok {
		t.Errorf("%s lost its tag while still held: %s", queued, nomadShows(t, queued))
	}
}

// waitHeld waits until Nomad has job id held by the planner: dead at
// count 0, its current version tagged themis-held with a description
// starting with prefix.
func waitHeld(t testing.TB, id, prefix string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, id+" to be held", func() (bool, error) {
		j, _, err := env.nomad.Jobs().Info(id, nil)
		if err != nil {
			return false, err
		}
		held := *j.Status == "dead" && *j.TaskGroups[0].Count == 0 && j.VersionTag != nil && j.VersionTag.Name == nomad.HeldTag &&
			len(j.VersionTag.Description) >= len(prefix) && j.VersionTag.Description[:len(prefix)] == prefix
		return held, fmt.Errorf("%s", nomadShowsJob(j))
	})
}

// taggedVersion is the version of job id tagged themis-held, if any.
func taggedVersion(t testing.TB, id string) (uint64, bool) {
	t.Helper()
	vs, _, _, err := env.nomad.Jobs().Versions(id, false, nil)
	if err != nil {
		t.Fatalf("versions of %s: %v", id, err)
	}
	for _, v := range vs {
		if v.VersionTag != nil && v.VersionTag.Name == nomad.HeldTag {
			return *v.Version, true
		}
	}
	return 0, false
}

// nomadShows is what `nomad job status` and `nomad job history` show of a
// job: its status, version, count, pool and the version's tag.
func nomadShows(t testing.TB, id string) string {
	t.Helper()
	j, _, err := env.nomad.Jobs().Info(id, nil)
	if err != nil {
		return id + ": " + err.Error()
	}
	return nomadShowsJob(j)
}

func nomadShowsJob(j *nomadapi.Job) string {
	tag := "no tag"
	if j.VersionTag != nil {
		tag = fmt.Sprintf("tag %s %q", j.VersionTag.Name, j.VersionTag.Description)
	}
	return fmt.Sprintf("%s: status %s, version %d, count %d, pool %s, %s", *j.ID, *j.Status, *j.Version, *j.TaskGroups[0].Count, *j.NodePool, tag)
}
