package auction

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// OfferFromNodes is the offer of a cluster's free GPUs: the healthy GPUs of
// schedulable nodes that no grant holds. Machines are in name order, each
// machine's GPUs ordered by topology path then index, so that the GPUs a
// bundle takes first share the deepest cells (NVLink pair, PCIe switch).
func OfferFromNodes(nodes []core.Node, grants []core.Grant) Offer {
	busy := map[string]bool{}
	for _, g := range grants {
		for _, id := range g.GPUs {
			busy[id] = true
		}
	}
	idx := make([]int, 0, len(nodes))
	for i := range nodes {
		if nodes[i].Schedulable {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return nodes[idx[a]].Name < nodes[idx[b]].Name })
	var o Offer
	for _, i := range idx {
		n := &nodes[i]
		var free []core.GPU
		for _, g := range n.GPUs {
			if g.Healthy && !busy[g.ID] {
				free = append(free, g)
			}
		}
		if len(free) == 0 {
			continue
		}
		slices.SortStableFunc(free, func(a, b core.GPU) int {
			if c := strings.Compare(strings.Join(a.Path, "/"), strings.Join(b.Path, "/")); c != 0 {
				return c
			}
			return a.Index - b.Index
		})
		m := Machine{ID: n.ID, Rack: n.Rack}
		for _, g := range free {
			m.Free = append(m.Free, g.ID)
		}
		o.Machines = append(o.Machines, m)
	}
	return o
}

// JobApp models a core job as a single-job app (Equation 1). A core job is a
// gang: it runs on exactly j.GPUs GPUs (Demand = Gang = j.GPUs). Its work
// is counted in gang-seconds: one "iteration" is one second of the gang at
// the ideal placement, so iter_time_serial is j.GPUs GPU-seconds, iter_left
// is j.Remaining and iter_total adds the iterations already done, estimated
// from the GPU-seconds attained. A granted job holds its gang, spread as
// held says. nAvg is the app's N_avg (Contention), sens its model's
// slowdowns.
func JobApp(j *core.Job, now time.Time, nAvg float64, sens Sensitivity, held Class) (App, error) {
	if j.GPUs < 1 {
		return App{}, fmt.Errorf("job %s: %d GPUs", j.Key, j.GPUs)
	}
	if j.Remaining < 0 {
		return App{}, fmt.Errorf("job %s: no estimate of the work left: finish-time fairness needs one", j.Key)
	}
	g := float64(j.GPUs)
	job := Job{
		ID:         j.Key.String(),
		IterTime:   g,
		ItersLeft:  j.Remaining,
		ItersTotal: j.Remaining + max(0, j.Attained)/g,
		Demand:     j.GPUs,
		Gang:       j.GPUs,
	}
	if job.ItersTotal <= 0 {
		return App{}, fmt.Errorf("job %s: no work, done or not started", j.Key)
	}
	if j.Phase == core.Granted {
		job.Held, job.HeldClass = j.GPUs, held
	}
	return App{
		ID:      j.Key.String(),
		Elapsed: max(0, now.Sub(j.Submitted).Seconds()),
		NAvg:    nAvg,
		Sens:    sens,
		Jobs:    []Job{job},
	}, nil
}
