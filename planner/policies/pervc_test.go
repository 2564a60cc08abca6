package policies

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// quotaPlacer is a Placer for the core's tests: each VC may hold its
// quota's GPUs, placed by the free set.
type quotaPlacer struct {
	quota, used map[string]int
	held        map[core.JobKey]int
	vcOf        map[core.JobKey]string
}

func newQuotaPlacer(quota map[string]int, running []core.Job) *quotaPlacer {
	q := &quotaPlacer{quota: quota, used: map[string]int{}, held: map[core.JobKey]int{}, vcOf: map[core.JobKey]string{}}
	for _, j := range running {
		q.used[j.VC] += j.GPUs
		q.held[j.Key], q.vcOf[j.Key] = j.GPUs, j.VC
	}
	return q
}

func (q *quotaPlacer) Place(j *core.Job, free *core.FreeGPUs, _ func(core.JobKey)) (core.Grant, bool, string) {
	if q.used[j.VC]+j.GPUs > q.quota[j.VC] {
		return core.Grant{}, false, fmt.Sprintf("vc %s is at its quota", j.VC)
	}
	g, ok := free.PlaceJob(j, true)
	if !ok {
		return core.Grant{}, false, "no room"
	}
	q.used[j.VC] += j.GPUs
	q.held[j.Key], q.vcOf[j.Key] = j.GPUs, j.VC
	return g, true, ""
}

func (q *quotaPlacer) Never(j *core.Job) (bool, string) { return j.GPUs > q.quota[j.VC], "too large" }
func (q *quotaPlacer) WaitingVCs() int                  { return 0 }
func (q *quotaPlacer) Overflow(*core.Job, *core.FreeGPUs) (core.Grant, bool, string) {
	return core.Grant{}, false, "no overflow"
}
func (q *quotaPlacer) Guaranteed(vc string) int                { return q.quota[vc] }
func (q *quotaPlacer) SetVictimCost(func(core.JobKey) float64) {}
func (q *quotaPlacer) Release(k core.JobKey) {
	if n, ok := q.held[k]; ok {
		q.used[q.vcOf[k]] -= n
		delete(q.held, k)
	}
}

// TestPerVCPolicies: two VCs of one cluster, each with its own policy, in
// one Decide: in the fitgpp VC a trial-and-error job preempts one
// best-effort job (the first of equal Score) and the VC's queue blocks
// behind its BE head; in the tiresias-las VC a new job outranks a running
// one that used up its first queue and preempts it. With fifo for both,
// nothing is preempted; with tiresias-las for both, only the research VC
// preempts.
func TestPerVCPolicies(t *testing.T) {
	nodes := []core.Node{node8("n0"), node8("n1")}
	vcJob := func(id, vc string, gpus, submitted int, phase core.Phase, class string) core.Job {
		j := job(id, gpus, submitted, phase)
		j.VC, j.Class = vc, class
		return j
	}
	be1 := vcJob("be1", "trial", 4, 1, core.Granted, core.ClassBestEffort)
	be2 := vcJob("be2", "trial", 4, 2, core.Granted, core.ClassBestEffort)
	old := vcJob("old", "research", 8, 3, core.Granted, "")
	old.Attained, old.Executed = 100000, 12500
	jobs := []core.Job{be1, be2, old,
		vcJob("be3", "trial", 4, 4, core.Queued, core.ClassBestEffort),
		vcJob("te1", "trial", 4, 5, core.Queued, core.ClassTrialAndError),
		vcJob("new", "research", 8, 6, core.Queued, ""),
	}
	grants := []core.Grant{
		grant("be1", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3"),
		grant("be2", "id-n0", "n0-4", "n0-5", "n0-6", "n0-7"),
		grant("old", "id-n1", "n1-0", "n1-1", "n1-2", "n1-3", "n1-4", "n1-5", "n1-6", "n1-7"),
	}
	policy := func(name string) core.Policy {
		p, err := newPolicy(name, core.Knobs{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name               string
		policy             core.Policy
		preempted, granted []string
		waiting            map[string]string
	}{
		{name: "fifo everywhere", policy: policy("fifo"),
			waiting: map[string]string{"be3": `vc trial is at its quota`, "te1": `behind default/be3 in virtual cluster "trial"'s fifo queue`,
				"new": `vc research is at its quota`}},
		{name: "tiresias-las everywhere", policy: policy("tiresias-las"),
			preempted: []string{"old"}, granted: []string{"new"},
			waiting: map[string]string{"be3": `ranked below the running jobs of virtual cluster "trial" by tiresias-las`,
				"te1": `ranked below the running jobs of virtual cluster "trial" by tiresias-las`}},
		{name: "fitgpp and tiresias-las", policy: core.NewPerVC(policy("fifo"), map[string]core.Policy{"trial": policy("fitgpp"), "research": policy("tiresias-las")}),
			preempted: []string{"be1", "old"}, granted: []string{"new", "te1"},
			waiting: map[string]string{"be3": `vc trial is at its quota`, "old": ``}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQuotaPlacer(map[string]int{"trial": 8, "research": 8}, jobs[:3])
			d := core.Scheduler{Policy: tc.policy, Placer: q, ExplainWaits: true}.Decide(core.State{Nodes: nodes, Jobs: jobs, Grants: grants}, time.Unix(20000, 0))
			var preempted, granted []string
			seenGrant := false
			for _, a := range d.Actions {
				switch a := a.(type) {
				case core.PreemptAction:
					if seenGrant {
						t.Errorf("preemption of %s after a grant: %v", a.Grant.Job.ID, d.Actions)
					}
					preempted = append(preempted, a.Grant.Job.ID)
				case core.GrantAction:
					seenGrant = true
					granted = append(granted, a.Grant.Job.ID)
				}
			}
			slices.Sort(preempted)
			slices.Sort(granted)
			if !slices.Equal(preempted, tc.preempted) || !slices.Equal(granted, tc.granted) {
				t.Errorf("preempted %v granted %v, want %v and %v", preempted, granted, tc.preempted, tc.granted)
			}
			for _, w := range d.Waits {
				want, ok := tc.waiting[w.Job.ID]
				if !ok {
					t.Errorf("%s waits (%s), want it placed", w.Job.ID, w.Reason)
				} else if want != "" && w.Reason != want {
					t.Errorf("%s waits: %q, want %q", w.Job.ID, w.Reason, want)
				}
			}
		})
	}
}

// TestPerVCRank: each VC's jobs are ranked by its policy; the VCs on the
// default policy come first, ranked together, then each VC with its own
// policy in name order.
func TestPerVCRank(t *testing.T) {
	mk := func(id, vc string, submitted int, attained float64) *core.Job {
		j := job(id, 1, submitted, core.Queued)
		j.VC, j.Attained = vc, attained
		return &j
	}
	jobs := []*core.Job{
		mk("z1", "z", 1, 0), mk("a1", "a", 2, 0), mk("d1", "d1", 3, 0), mk("z2", "z", 4, 0),
		mk("a2", "a", 5, 0), mk("d2", "d2", 6, 0), mk("d3", "d1", 0, 0),
	}
	jobs[4].Attained, jobs[1].Attained = 10, 50 // las: a2 before a1
	las, _ := newPolicy("las", core.Knobs{})
	p := core.NewPerVC(FIFO{}, map[string]core.Policy{"a": las, "z": FIFO{}})
	p.Rank(time.Unix(100, 0), jobs)
	if got, want := jobIDs(jobs), []string{"d3", "d1", "d2", "a2", "a1", "z1", "z2"}; !slices.Equal(got, want) {
		t.Errorf("ranked %v, want %v", got, want)
	}
	if p.Name() != "fifo+a=las+z=fifo" {
		t.Errorf("name %q", p.Name())
	}
	if core.NewPerVC(FIFO{}, nil) != (FIFO{}) {
		t.Error("NewPerVC without VC policies is not the default policy")
	}
}
