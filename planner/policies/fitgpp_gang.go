package policies

import "github.com/themis-nomad/themis/planner/core"

// VictimSet implements GangPreemptor: live (equal parts), a TE gang split
// over several nodes that no single preemption lets be placed may preempt
// several BE jobs. FitGpp takes, in its own order (Equation 2's Score,
// lowest first, among BE jobs preempted fewer than P times that hold GPUs
// on nodes that could hold a part), victims until the gang can be placed,
// then drops every victim the placement does not need (the worst-scored
// first), so that no preempted job fails to contribute. If even all those
// candidates together do not make room, it preempts nothing. The set is
// greedy, not searched: it is irreducible, not always the smallest.
func (f *FitGpp) VictimSet(j *core.Job, running []*core.Job, room *core.Room) []*core.Job {
	per, ok := room.PartsGang(j)
	if !ok {
		return nil
	}
	var cands []*core.Job
	for _, v := range running {
		if v.Class == core.ClassBestEffort && v.Preemptions < f.MaxPreemptions && room.OnPartNodes(v, per) {
			cands = append(cands, v)
		}
	}
	if len(cands) < 2 || !room.FitsWithAll(j, cands) {
		return nil
	}
	chosen := map[*core.Job]bool{}
	var set []*core.Job
	for !room.FitsWithAll(j, set) {
		v := f.pick(running, room, func(v *core.Job) bool { return !chosen[v] && room.OnPartNodes(v, per) })
		if v == nil {
			return nil
		}
		chosen[v] = true
		set = append(set, v)
	}
	for i := len(set) - 1; i >= 0; i-- {
		rest := append(set[:i:i], set[i+1:]...)
		if room.FitsWithAll(j, rest) {
			set = rest
		}
	}
	return set
}
