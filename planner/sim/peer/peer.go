// Package peer is the Tiresias simulator's own disciplines and placement
// (SymbioticLab/Tiresias, simulator/), the policies of the simulator's
// peer-semantics mode (sim.semantics=tiresias, docs/tiresias.md): stateful
// and meant for a simulation only, kept to compare the two simulators job
// for job. The stack builds them (stack.SemanticsTiresias); they are in
// no list of the registry's policies.
package peer

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// The Tiresias simulator's own disciplines (SymbioticLab/Tiresias,
// simulator/run_sim.py), for the simulator's peer-semantics mode
// (sim.semantics=tiresias, docs/tiresias.md; sim.scheme=count or yarn,
// yarn.go). Each keeps the peer's
// ordered lists from one scheduling pass to the next, because the peer's
// order inside a queue depends on them: they are stateful, and meant for a
// simulation only. Every rule below is the peer's, cited by function.
//
// A pass: the jobs are scanned in list order, and each job that fits in
// the GPUs left (counted, not placed: scheme "count"; dlas_sim_jobs counts
// under every scheme) runs; the others wait. The core's preemptive
// scheduler does exactly this with a budget of the cluster's GPUs.

// Names maps the names New accepts, ours and the peer's, to
// the peer's.
var Names = map[string]string{
	"fifo": "fifo", "srtf": "shortest", "shortest": "shortest",
	"srsf": "shortest-gpu", "shortest-gpu": "shortest-gpu",
	"tiresias-las": "dlas-gpu", "dlas-gpu": "dlas-gpu",
	"tiresias-gittins": "dlas-gpu-gittins", "dlas-gpu-gittins": "dlas-gpu-gittins",
}

// Queues are the peer's queue limits (jobs.py: num_queue = 3,
// queue_limit = [3250, 7200, 18000], of which the first two bound the
// three queues), in GPU-seconds.
var Queues = []float64{3250, 7200}

// New returns the peer discipline for name (ours or the peer's:
// fifo, srtf or shortest, srsf or shortest-gpu, tiresias-las or dlas-gpu,
// tiresias-gittins or dlas-gpu-gittins). Knobs: tiresias.queues (default
// Queues) and, for dlas-gpu-gittins, tiresias.gittins_dist (the peer
// reads yarn-gput1000.csv, which loadSizes loads).
func New(name string, k core.Knobs, loadSizes func(path string) ([]float64, error)) (core.Policy, error) {
	peer, ok := Names[name]
	if !ok {
		return nil, fmt.Errorf("policy %q: no peer-semantics version (known: fifo, srtf, srsf, tiresias-las, tiresias-gittins, or the peer's names)", name)
	}
	scheme := k.String("sim.scheme", "count")
	if scheme != "count" && scheme != "yarn" {
		return nil, fmt.Errorf("sim.scheme = %q: want count or yarn (the peer's placement schemes)", scheme)
	}
	var p core.Policy
	var own []string
	var dlas *DLAS
	switch peer {
	case "fifo":
		p = FIFO{}
		if scheme == "yarn" {
			p = YarnFIFO{}
		}
	case "shortest", "shortest-gpu":
		s := &Shortest{gpu: peer == "shortest-gpu", pos: map[core.JobKey]int{}}
		p = s
		if scheme == "yarn" {
			p = YarnShortest{s}
		}
	default:
		q, err := k.Seconds("tiresias.queues", Queues)
		if err != nil {
			return nil, err
		}
		// dlas-gpu reads the samples' knob too, so that one set of knobs
		// serves both (the peer's dlas-gpu ignores the file it loads).
		d := &DLAS{Limits: q, gittins: peer == "dlas-gpu-gittins", q: map[core.JobKey]int{},
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

// FIFO is one_queue_fifo_sim_jobs: pending jobs in arrival order, each
// started while it fits; the first that does not blocks the rest.
type FIFO struct{}

func (FIFO) Name() string                       { return "fifo" }
func (FIFO) Rank(_ time.Time, jobs []*core.Job) { core.SortFIFO(jobs) }
func (FIFO) Preemptive() bool                   { return false }
func (FIFO) Blocking() bool                     { return true }
func (FIFO) Consolidate(*core.Job) bool         { return false }
func (p FIFO) Capabilities() core.Capabilities  { return core.RankOnly(p) }

// Shortest is shortest_first_sim_jobs: the runnable list, kept from
// pass to pass, is stable-sorted by remaining time (shortest) or remaining
// time x GPUs (shortest-gpu), so that ties keep the previous pass's order;
// arrivals join its end in arrival order.
type Shortest struct {
	gpu  bool
	pos  map[core.JobKey]int // place in the previous pass's list
	next int
}

func (p *Shortest) Name() string {
	if p.gpu {
		return "shortest-gpu"
	}
	return "shortest"
}
func (p *Shortest) Preemptive() bool                { return true }
func (p *Shortest) Blocking() bool                  { return false }
func (p *Shortest) Consolidate(*core.Job) bool      { return false }
func (p *Shortest) Capabilities() core.Capabilities { return core.RankOnly(p) }

func (p *Shortest) Rank(_ time.Time, jobs []*core.Job) {
	core.SortFIFO(jobs)
	live := make(map[core.JobKey]bool, len(jobs))
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
	key := func(j *core.Job) float64 {
		// remaining_time = int(duration - total_executed_time);
		// remaining_gputime = int(remaining_time * num_gpu).
		r := math.Trunc(j.Remaining)
		if p.gpu {
			return math.Trunc(r * float64(j.GPUs))
		}
		return r
	}
	slices.SortFunc(jobs, func(a, b *core.Job) int {
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

// DLAS is dlas_sim_jobs with gputime (dlas-gpu), or with the Gittins
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
type DLAS struct {
	Limits   []float64
	DistPath string
	gittins  bool
	table    *Gittins
	queues   [][]core.JobKey
	q        map[core.JobKey]int
}

func (p *DLAS) Name() string {
	if p.gittins {
		return "dlas-gpu-gittins"
	}
	return "dlas-gpu"
}
func (p *DLAS) Preemptive() bool                { return true }
func (p *DLAS) Blocking() bool                  { return false }
func (p *DLAS) Consolidate(*core.Job) bool      { return false }
func (p *DLAS) Capabilities() core.Capabilities { return core.Capabilities{Policy: p, Rechecker: p} }

// Gittins reports whether the policy is dlas-gpu-gittins.
func (p *DLAS) Gittins() bool { return p.gittins }

// SetSizes gives dlas-gpu-gittins its job-size samples.
func (p *DLAS) SetSizes(sizes []float64) { p.table = NewGittins(sizes) }

func (p *DLAS) Rank(_ time.Time, jobs []*core.Job) {
	if len(p.queues) == 0 {
		p.queues = make([][]core.JobKey, len(p.Limits)+1)
	}
	byKey := make(map[core.JobKey]*core.Job, len(jobs))
	for _, j := range jobs {
		byKey[j.Key] = j
	}
	// The previous pass's partition (its statuses are the phases now),
	// dropping finished jobs.
	for qi, q := range p.queues {
		run, wait := q[:0:0], []core.JobKey(nil)
		for _, k := range q {
			j, ok := byKey[k]
			switch {
			case !ok:
				delete(p.q, k)
			case j.Phase == core.Granted:
				run = append(run, k)
			default:
				wait = append(wait, k)
			}
		}
		p.queues[qi] = append(run, wait...)
	}
	// Arrivals, then demotions, in arrival order.
	core.SortFIFO(jobs)
	for _, j := range jobs {
		if _, ok := p.q[j.Key]; !ok {
			p.q[j.Key] = 0
			p.queues[0] = append(p.queues[0], j.Key)
		}
	}
	last := len(p.queues) - 1
	for _, j := range jobs {
		qi := p.q[j.Key]
		if j.Phase != core.Granted || qi >= last {
			continue
		}
		if math.Trunc(j.Executed*float64(j.GPUs)) >= p.Limits[qi] {
			p.q[j.Key] = qi + 1
			p.queues[qi] = slices.DeleteFunc(p.queues[qi], func(k core.JobKey) bool { return k == j.Key })
			p.queues[qi+1] = append(p.queues[qi+1], j.Key)
		}
	}
	i := 0
	for qi, q := range p.queues {
		if p.gittins && p.table != nil {
			rank := func(k core.JobKey) float64 {
				j := byKey[k]
				return p.table.Index(math.Trunc(j.Executed * float64(j.GPUs)))
			}
			slices.SortStableFunc(q, func(a, b core.JobKey) int {
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
func (p *DLAS) NextChange(now time.Time, jobs []*core.Job) time.Time {
	next := math.Inf(1)
	for _, j := range jobs {
		qi, ok := p.q[j.Key]
		if !ok || j.Phase != core.Granted || qi >= len(p.Limits) || j.GPUs == 0 {
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

// Gittins is the peer's Gittins index table (run_sim.py:
// parse_job_dist, cal_r_gittins_index, get_gittins_index), with its fixed
// quantum of 3,250 GPU-seconds (jobs.py: gittins_delta), its rounding and
// its integer division.
type Gittins struct {
	data []int64 // sorted samples
	gi   []float64
}

// PeerGittinsDelta is the peer's static Gittins quantum (jobs.py).
const PeerGittinsDelta = 3250

// NewGittins builds the table from job-size samples (truncated to
// whole GPU-seconds, as the peer's int()).
func NewGittins(sizes []float64) *Gittins {
	t := &Gittins{}
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
func (t *Gittins) firstAbove(a int64) int {
	i, _ := slices.BinarySearch(t.data, a+1)
	return i
}

func (t *Gittins) rIndex(a int64) float64 {
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
func (t *Gittins) Index(a float64) float64 {
	i := t.firstAbove(int64(math.Floor(a)))
	if i >= len(t.data) {
		return 0
	}
	return t.gi[i]
}
