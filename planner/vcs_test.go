package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

const twoTeams = `
vc "vision" {
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "*" {}
}
vc "speech" {
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "*" {}
}
`

// Virtual clusters live: a guaranteed job reclaims its cell from an
// opportunistic job, which is not granted again while the guaranteed job
// waits for it to stop (no thrash); a planner restarted afterwards replays
// the leases with their virtual cells, so the other team's job gets the
// other socket.
func TestVirtualClustersReclaimAndReplay(t *testing.T) {
	st := vcsStack(t, "fifo", "two-teams.hcl", twoTeams)
	h := newHarness(t, 8, st)
	fn, fs, round := h.Nomad, h.Store, h.Round
	key := func(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }

	fn.SubmitIn("opp", 8, "be", "10s", "speech", -1)
	round("opportunistic job")
	fn.SubmitIn("vision", 4, "be", "10s", "vision", 0)
	for i := range 6 {
		round("vision reclaims " + itoa(i))
	}
	if len(fn.Running("vision")) != 1 || len(fn.Running("opp")) != 0 {
		t.Fatalf("vision runs %d, opp runs %d: want vision alone", len(fn.Running("vision")), len(fn.Running("opp")))
	}
	if n := len(fn.Allocs[key("opp")]); n != 1 {
		t.Errorf("the opportunistic job was placed %d times, want once (granted again while vision waited: thrash)", n)
	}
	vl := fs.JobLeases[key("vision")]
	if len(vl.Cells) != 4 || !strings.HasPrefix(vl.Cells[0], "vision/") {
		t.Fatalf("vision's lease records cells %v", vl.Cells)
	}

	// A new planner (a restart) replays vision's lease; speech's job then
	// gets the other socket.
	h.Restart()
	fn.SubmitIn("speech", 4, "be", "10s", "speech", 0)
	round("after a restart")
	sl, ok := fs.JobLeases[key("speech")]
	if !ok {
		t.Fatalf("speech was not granted; status %+v", fs.JobStatuses[key("speech")])
	}
	for _, g := range sl.GPUs {
		if slices.Contains(vl.GPUs, g) {
			t.Fatalf("speech got %v, overlapping vision's %v", sl.GPUs, vl.GPUs)
		}
	}
	if socket(sl.GPUs) < 0 || socket(sl.GPUs) == socket(vl.GPUs) {
		t.Errorf("speech's GPUs %v: want the socket vision does not use (%v)", sl.GPUs, vl.GPUs)
	}
}

// socket is the socket of a set of fake GPU IDs (gpu-0-0..3: 0, 4..7: 1),
// -1 when they span both.
func socket(gpus []string) int {
	s := -1
	for _, g := range gpus {
		k := 0
		if g >= "gpu-0-4" {
			k = 1
		}
		if s >= 0 && k != s {
			return -1
		}
		s = k
	}
	return s
}
