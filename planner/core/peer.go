package core

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// The Tiresias simulator's own disciplines (SymbioticLab/Tiresias,
// simulator/run_sim.py), for the simulator's peer-semantics mode
// (sim.semantics=tiresias, docs/tiresias.md; sim.scheme=count or yarn,
// peeryarn.go). Each keeps the peer's
// ordered lists from one scheduling pass to the next, because the peer's
// order inside a queue depends on them: they are stateful, and meant for a
// simulation only. Every rule below is the peer's, cited by function.
//
// A pass: the jobs are scanned in list order, and each job that fits in
// the GPUs left (counted, not placed: scheme "count"; dlas_sim_jobs counts
// under every scheme) runs; the others wait. The core's preemptive
// scheduler does exactly this with a budget of the cluster's GPUs.

// PeerNames maps the names NewPeerPolicy accepts, ours and the peer's, to
// the peer's.
var PeerNames = map[string]string{
	"fifo": "fifo", "srtf": "shortest", "shortest": "shortest",
	"srsf": "shortest-gpu", "shortest-gpu": "shortest-gpu",
	"tiresias-las": "dlas-gpu", "dlas-gpu": "dlas-gpu",
	"tiresias-gittins": "dlas-gpu-gittins", "dlas-gpu-gittins": "dlas-gpu-gittins",
}

// PeerQueues are the peer's queue limits (jobs.py: num_queue = 3,
// queue_limit = [3250, 7200, 18000], of which the first two bound the
// three queues), in GPU-seconds.
var PeerQueues = []float64{3250, 7200}

// NewPeerPolicy returns the peer discipline for name (ours or the peer's:
// fifo, srtf or shortest, srsf or shortest-gpu, tiresias-las or dlas-gpu,
// tiresias-gittins or dlas-gpu-gittins). Knobs: tiresias.queues (default
// PeerQueues) and, for dlas-gpu-gittins, tiresias.gittins_dist (the peer
// reads yarn-gput1000.csv, which loadSizes loads).
func NewPeerPolicy(name string, k Knobs, loadSizes func(path string) ([]float64, error)) (Policy, error) {
	peer, ok := PeerNames[name]
	if !ok {
		return nil, fmt.Errorf("policy %q: no peer-semantics version (known: fifo, srtf, srsf, tiresias-las, tiresias-gittins, or the peer's names)", name)
	}
	scheme := k.String("sim.scheme", "count")
	if scheme != "count" && scheme != "yarn" {
		return nil, fmt.Errorf("sim.scheme = %q: want count or yarn (the peer's placement schemes)", scheme)
	}
	var p Policy
	var own []string
	var dlas *PeerDLAS
	switch peer {
	case "fifo":
		p = PeerFIFO{}
		if scheme == "yarn" {
			p = PeerYarnFIFO{}
		}
	case "shortest", "shortest-gpu":
		s := &PeerShortest{gpu: peer == "shortest-gpu", pos: map[JobKey]int{}}
		p = s
		if scheme == "yarn" {
			p = PeerYarnShortest{s}
		}
	default:
		q, err := k.Seconds("tiresias.queues", PeerQueues)
		if err != nil {
			return nil, err
		}
		// dlas-gpu reads the samples' knob too, so that one set of knobs
		// serves both (the peer's dlas-gpu ignores the file it loads).
		d := &PeerDLAS{Limits: q, gittins: peer == "dlas-gpu-gittins", q: map[JobKey]int{},
			DistPath: k.String("tiresias.gittins_dist", "")}
		p, own, dlas = d, []string{"tiresias"}, d
	}
	if err := k.UnusedIn(own...); err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	if dlas != nil && dlas.gittins {
		if dlas.DistPath == "" {
			return nil, fmt.Errorf("policy %s: needs tiresias.gittins_dist (the peer's yarn-gput1000.csv)", dlas.Name())
		}
		sizes, err := loadSizes(dlas.DistPath)
		if err != nil {
			return nil, fmt.Errorf("tiresias.gittins_dist: %w", err)
		}
		dlas.SetSizes(sizes)
	}
	return p, nil
}

// PeerFIFO is one_queue_fifo_sim_jobs: pending jobs in arrival order, each
// started while it fits; the first that does not blocks the rest.
type PeerFIFO struct{}

func (PeerFIFO) Name() string                  { return "fifo" }
func (PeerFIFO) Rank(_ time.Time, jobs []*Job) { SortFIFO(jobs) }
func (PeerFIFO) Preemptive() bool              { return false }
func (PeerFIFO) Blocking() bool                { return true }
func (PeerFIFO) Consolidate(*Job) bool         { return false }
func (p PeerFIFO) Capabilities() Capabilities  { return RankOnly(p) }

// PeerShortest is shortest_first_sim_jobs: the runnable list, kept from
// pass to pass, is stable-sorted by remaining time (shortest) or remaining
// time x GPUs (shortest-gpu), so that ties keep the previous pass's order;
// arrivals join its end in arrival order.
type PeerShortest struct {
	gpu  bool
	pos  map[JobKey]int // place in the previous pass's list
	next int
}

func (p *PeerShortest) Name() string {
	if p.gpu {
		return "shortest-gpu"
	}
	return "shortest"
}
func (p *PeerShortest) Preemptive() bool           { return true }
func (p *PeerShortest) Blocking() bool             { return false }
func (p *PeerShortest) Consolidate(*Job) bool      { return false }
func (p *PeerShortest) Capabilities() Capabilities { return RankOnly(p) }

func (p *PeerShortest) Rank(_ time.Time, jobs []*Job) {
	SortFIFO(jobs)
	live := make(map[JobKey]bool, len(jobs))
	for _, j := range jobs {
		live[j.Key] = true
		if _, ok := p.pos[j.Key]; !ok {
			p.pos[j.Key] = p.next
			p.next++
		}
	}
	for k := range p.pos {
		if !live[k] {
			delete(p.pos, k)
		}
	}
	key := func(j *Job) float64 {
		// remaining_time = int(duration - total_executed_time);
		// remaining_gputime = int(remaining_time * num_gpu).
		r := math.Trunc(j.Remaining)
		if p.gpu {
			return math.Trunc(r * float64(j.GPUs))
		}
		return r
	}
	slices.SortFunc(jobs, func(a, b *Job) int {
		if c := cmpFloat(key(a), key(b)); c != 0 {
			return c
		}
		return p.pos[a.Key] - p.pos[b.Key]
	})
	for i, j := range jobs {
		p.pos[j.Key] = i
	}
	p.next = len(jobs)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// PeerDLAS is dlas_sim_jobs with gputime (dlas-gpu), or with the Gittins
// index inside each queue (dlas-gpu-gittins):
//
//   - an arrival joins the end of queue 0;
//   - at each event (arrival, completion, or the next demotion time below),
//     a running job whose executed seconds x GPUs reach its queue's limit
//     moves to the end of the next queue, one queue per event, in arrival
//     order; a waiting job is never demoted;
//   - a pass scans the queues in order, each in its list order
//     (dlas-gpu-gittins first stable-sorts every queue, the last one too,
//     by index, highest first, then by submission), and runs each job that
//     fits in the GPUs left;
//   - after the pass, each queue's waiting jobs move behind its running
//     ones, both in their order: inside a queue a running job is never
//     preempted for a waiting one;
//   - the next demotion event is floor((limit - executed seconds) / GPUs)
//     seconds after the pass: the peer subtracts seconds from GPU-seconds,
//     so a multi-GPU job is demoted at the first event after it crosses
//     the limit, possibly well after.
type PeerDLAS struct {
	Limits   []float64
	DistPath string
	gittins  bool
	table    *PeerGittins
	queues   [][]JobKey
	q        map[JobKey]int
}

func (p *PeerDLAS) Name() string {
	if p.gittins {
		return "dlas-gpu-gittins"
	}
	return "dlas-gpu"
}
func (p *PeerDLAS) Preemptive() bool           { return true }
func (p *PeerDLAS) Blocking() bool             { return false }
func (p *PeerDLAS) Consolidate(*Job) bool      { return false }
func (p *PeerDLAS) Capabilities() Capabilities { return Capabilities{Policy: p, Rechecker: p} }

// Gittins reports whether the policy is dlas-gpu-gittins.
func (p *PeerDLAS) Gittins() bool { return p.gittins }

// SetSizes gives dlas-gpu-gittins its job-size samples.
func (p *PeerDLAS) SetSizes(sizes []float64) { p.table = NewPeerGittins(sizes) }

func (p *PeerDLAS) Rank(_ time.Time, jobs []*Job) {
	if len(p.queues) == 0 {
		p.queues = make([][]JobKey, len(p.Limits)+1)
	}
	byKey := make(map[JobKey]*Job, len(jobs))
	for _, j := range jobs {
		byKey[j.Key] = j
	}
	// The previous pass's partition (its statuses are the phases now),
	// dropping finished jobs.
	for qi, q := range p.queues {
		run, wait := q[:0:0], []JobKey(nil)
		for _, k := range q {
			j, ok := byKey[k]
			switch {
			case !ok:
				delete(p.q, k)
			case j.Phase == Granted:
				run = append(run, k)
			default:
				wait = append(wait, k)
			}
		}
		p.queues[qi] = append(run, wait...)
	}
	// Arrivals, then demotions, in arrival order.
	SortFIFO(jobs)
	for _, j := range jobs {
		if _, ok := p.q[j.Key]; !ok {
			p.q[j.Key] = 0
			p.queues[0] = append(p.queues[0], j.Key)
		}
	}
	last := len(p.queues) - 1
	for _, j := range jobs {
		qi := p.q[j.Key]
		if j.Phase != Granted || qi >= last {
			continue
		}
		if math.Trunc(j.Executed*float64(j.GPUs)) >= p.Limits[qi] {
			p.q[j.Key] = qi + 1
			p.queues[qi] = slices.DeleteFunc(p.queues[qi], func(k JobKey) bool { return k == j.Key })
			p.queues[qi+1] = append(p.queues[qi+1], j.Key)
		}
	}
	i := 0
	for qi, q := range p.queues {
		if p.gittins && p.table != nil {
			rank := func(k JobKey) float64 {
				j := byKey[k]
				return p.table.Index(math.Trunc(j.Executed * float64(j.GPUs)))
			}
			slices.SortStableFunc(q, func(a, b JobKey) int {
				if c := cmpFloat(rank(b), rank(a)); c != 0 {
					return c
				}
				return byKey[a].Submitted.Compare(byKey[b].Submitted)
			})
			p.queues[qi] = q
		}
		for _, k := range q {
			jobs[i] = byKey[k]
			i++
		}
	}
}

// NextChange implements RecheckAfter: the peer's next_job_jump.
func (p *PeerDLAS) NextChange(now time.Time, jobs []*Job) time.Time {
	next := math.Inf(1)
	for _, j := range jobs {
		qi, ok := p.q[j.Key]
		if !ok || j.Phase != Granted || qi >= len(p.Limits) || j.GPUs == 0 {
			continue
		}
		// int(math.ceil((limit - executed_time) // num_gpu) + event_time)
		jump := math.Floor((p.Limits[qi] - math.Trunc(j.Executed)) / float64(j.GPUs))
		if jump > 0 {
			next = math.Min(next, jump)
		}
	}
	if math.IsInf(next, 1) {
		return time.Time{}
	}
	return now.Add(time.Duration(next) * time.Second)
}

// PeerGittins is the peer's Gittins index table (run_sim.py:
// parse_job_dist, cal_r_gittins_index, get_gittins_index), with its fixed
// quantum of 3,250 GPU-seconds (jobs.py: gittins_delta), its rounding and
// its integer division.
type PeerGittins struct {
	data []int64 // sorted samples
	gi   []float64
}

// PeerGittinsDelta is the peer's static Gittins quantum (jobs.py).
const PeerGittinsDelta = 3250

// NewPeerGittins builds the table from job-size samples (truncated to
// whole GPU-seconds, as the peer's int()).
func NewPeerGittins(sizes []float64) *PeerGittins {
	t := &PeerGittins{}
	for _, s := range sizes {
		t.data = append(t.data, int64(s))
	}
	slices.Sort(t.data)
	for _, v := range t.data {
		t.gi = append(t.gi, t.rIndex(v-1))
	}
	return t
}

// pyRound is Python's round(x, n): correctly rounded, half to even.
func pyRound(x float64, n int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	return v
}

// firstAbove is next(i for i, x in enumerate(data) if x > a).
func (t *PeerGittins) firstAbove(a int64) int {
	i, _ := slices.BinarySearch(t.data, a+1)
	return i
}

func (t *PeerGittins) rIndex(a int64) float64 {
	n := int64(len(t.data))
	if n == 0 || a > t.data[n-1]-1 {
		return 0
	}
	idx := int64(t.firstAbove(a))
	next := a + PeerGittinsDelta
	var idxDelta int64
	if next > t.data[n-1]-1 {
		idxDelta = n - 1
	} else {
		idxDelta = int64(t.firstAbove(next))
	}
	p := pyRound(float64(idxDelta-idx)*1.0/float64(n-idx), 5)
	var sum int64
	for _, v := range t.data[idx:idxDelta] {
		sum += v
	}
	sum += PeerGittinsDelta * (n - idxDelta)
	e := pyRound(float64(floorDiv(sum, n-idx)), 5)
	return pyRound(p*1000000/e, 4)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Index is get_gittins_index(a): the index of the first sample above a,
// 0 from the largest sample on.
func (t *PeerGittins) Index(a float64) float64 {
	i := t.firstAbove(int64(math.Floor(a)))
	if i >= len(t.data) {
		return 0
	}
	return t.gi[i]
}
