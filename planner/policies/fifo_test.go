package policies

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

func TestDecideFIFO(t *testing.T) {
	nodes := []core.Node{node8("n0")}
	cases := []struct {
		name       string
		jobs       []core.Job
		grants     []core.Grant
		wantGrant  []string // job ids granted, in order
		wantRel    []string
		wantWaitOn map[string]string // job -> substring of reason
	}{
		{
			name:      "grants in submission order",
			jobs:      []core.Job{job("b", 2, 2, core.Queued), job("a", 4, 1, core.Queued)},
			wantGrant: []string{"a", "b"},
		},
		{
			name:       "head-of-line blocking: the small job behind a blocked head waits",
			jobs:       []core.Job{job("run", 6, 0, core.Granted), job("big", 4, 1, core.Queued), job("small", 1, 2, core.Queued)},
			grants:     []core.Grant{grant("run", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5")},
			wantWaitOn: map[string]string{"big": "head of the fifo queue", "small": "behind default/big in the fifo queue"},
		},
		{
			name:       "a job larger than any node does not block the queue",
			jobs:       []core.Job{job("huge", 16, 0, core.Queued), job("small", 1, 1, core.Queued)},
			wantGrant:  []string{"small"},
			wantWaitOn: map[string]string{"huge": "largest schedulable node has 8"},
		},
		{
			name:      "a finished job's GPUs are released and re-granted in the same round",
			jobs:      []core.Job{job("done", 6, 0, core.Finished), job("next", 6, 1, core.Queued)},
			grants:    []core.Grant{grant("done", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5")},
			wantRel:   []string{"done"},
			wantGrant: []string{"next"},
		},
		{
			name:    "a grant whose job is gone is released",
			grants:  []core.Grant{grant("ghost", "id-n0", "n0-0")},
			wantRel: []string{"ghost"},
		},
		{
			name:   "a queued job that already holds a grant is not granted twice",
			jobs:   []core.Job{job("a", 2, 0, core.Queued)},
			grants: []core.Grant{grant("a", "id-n0", "n0-0", "n0-1")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := core.Scheduler{Policy: FIFO{}, ExplainWaits: true, SingleNode: true}.Decide(core.State{Nodes: nodes, Jobs: tc.jobs, Grants: tc.grants}, time.Unix(100, 0))
			var granted, released []string
			sawGrant := false
			for _, a := range d.Actions {
				switch a := a.(type) {
				case core.GrantAction:
					sawGrant = true
					granted = append(granted, a.Grant.Job.ID)
				case core.ReleaseAction:
					if sawGrant {
						t.Fatal("a release came after a grant")
					}
					released = append(released, a.Grant.Job.ID)
				}
			}
			if !slices.Equal(granted, tc.wantGrant) {
				t.Errorf("granted %v, want %v", granted, tc.wantGrant)
			}
			if !slices.Equal(released, tc.wantRel) {
				t.Errorf("released %v, want %v", released, tc.wantRel)
			}
			for id, want := range tc.wantWaitOn {
				found := false
				for _, w := range d.Waits {
					if w.Job.ID == id {
						found = true
						if !strings.Contains(w.Reason, want) {
							t.Errorf("%s waits because %q, want it to mention %q", id, w.Reason, want)
						}
					}
				}
				if !found {
					t.Errorf("%s has no wait reason", id)
				}
			}
		})
	}
}
