package planner

import (
	"fmt"
	"github.com/themis-nomad/themis/planner/plannertest"
	"math"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// fakeWorkload is one job of a live experiment on the fakes that works
// through its iterations and reports its progress (the lying tests).
type fakeWorkload struct {
	id, app string
	tot     int64   // its iterations
	done    float64 // iterations done, kept across moves
	end     time.Time
}

// progressRun drives a harness one second a round, as the driver and
// examples/hello would: every job whose allocations all run (none
// stopping to checkpoint) does speed(its allocations) iterations a second,
// keeps them across moves and finishes when it has done its total; while
// it runs it reports its progress (iteration and total, with the rate and
// allocation the driver adds); a job that does not run reports nothing new
// (its last report stays). The liar app's jobs report lie(iteration, true
// total) as their total (a negative result: no report). limit bounds the
// rounds.
type progressRun struct {
	jobs  []*fakeWorkload
	speed func(allocs []*plannertest.Alloc) float64
	liar  string
	lie   func(iter, total int64) int64
	limit int
}

// run runs the jobs, already submitted, to their ends and returns the
// clock at the start.
func (pr progressRun) run(t *testing.T, h *harness) time.Time {
	t.Helper()
	start := h.Clock
	h.Store.ProgressRecords = map[core.JobKey]lease.ProgressRecord{}
	for step := 0; ; step++ {
		if step > pr.limit {
			t.Fatalf("not finished after %d rounds", step)
		}
		left := 0
		for _, j := range pr.jobs {
			if !j.end.IsZero() {
				continue
			}
			left++
			k := core.JobKey{Namespace: "default", ID: j.id}
			r := h.Nomad.Running(j.id)
			runs := len(r) > 0
			for _, a := range r {
				runs = runs && a.StopAt.IsZero() && a.ClientStatus == "running"
			}
			if !runs {
				continue
			}
			speed := pr.speed(r)
			j.done = min(float64(j.tot), j.done+speed) // one second
			if j.done >= float64(j.tot) {
				h.Nomad.Finish(j.id)
				j.end = h.Clock
				delete(h.Store.ProgressRecords, k)
				continue
			}
			iter := int64(j.done)
			tot := j.tot
			if j.app == pr.liar && pr.lie != nil {
				tot = pr.lie(iter, j.tot)
			}
			if tot < 0 {
				delete(h.Store.ProgressRecords, k)
				continue
			}
			h.Store.ProgressRecords[k] = lease.ProgressRecord{Namespace: "default", JobID: j.id, AllocID: r[0].ID, Iteration: iter, Total: tot, Rate: speed, At: h.Clock}
		}
		if left == 0 {
			return start
		}
		h.Round(fmt.Sprintf("round %d", step))
	}
}

// finishes is each app's finish time (its last job's end, from start).
func (pr progressRun) finishes(start time.Time) map[string]float64 {
	out := map[string]float64{}
	for _, j := range pr.jobs {
		out[j.app] = math.Max(out[j.app], j.end.Sub(start).Seconds())
	}
	return out
}
