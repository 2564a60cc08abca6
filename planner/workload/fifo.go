package workload

import (
	"github.com/themis-nomad/themis/planner/trace"
)

// resources is a vector of the resources FitGpp schedules: CPUs, memory
// (GB) and GPUs, in that order.
type resources [3]float64

// gpu is the index of GPUs in resources (CPUs, memory, GPUs).
const gpu = 2

// resourceNames name resources' coordinates.
var resourceNames = [3]string{"CPUs", "memory", "GPUs"}

// demandOf is a job's request vector.
func demandOf(j trace.Job) resources {
	return resources{j.CPUs, j.MemoryGB, float64(j.GPUs)}
}

// fits reports whether d fits in free on every resource.
func (free resources) fits(d resources) bool {
	return d[0] <= free[0] && d[1] <= free[1] && d[2] <= free[2]
}

// total is the cluster's capacity.
func (c Cluster) total() resources {
	n, node := float64(c.Nodes), c.Node.capacity()
	return resources{n * node[0], n * node[1], n * node[2]}
}

// share is the largest coordinate of d relative to total: the load of d on
// its most loaded resource.
func (total resources) share(d resources) float64 {
	return max(d[0]/total[0], d[1]/total[1], d[2]/total[2])
}

// offeredWork is Σ_j D_jr·T_j, each resource's requested resource-seconds.
func offeredWork(jobs []trace.Job) resources {
	var w resources
	for _, j := range jobs {
		d := demandOf(j)
		for k := range w {
			w[k] += d[k] * j.Duration
		}
	}
	return w
}

// fifo is a non-preemptive, strict FIFO schedule of single-node jobs on a
// cluster of identical nodes: jobs start in admission order, the head of
// the queue on the node with the fewest free GPUs where it fits (best fit,
// the lowest-numbered among equals: the placement of the simulator's fifo
// policy, so that the load it sees is the one set here), and a head
// that fits nowhere blocks the jobs behind it (the paper's vanilla FIFO).
// It tracks the FIFO load: the demand of the jobs admitted and not yet
// finished (running or queued), on the most loaded resource, relative to
// the cluster's capacity.
type fifo struct {
	total resources
	free  []resources
	// inSystem is the demand of admitted, unfinished jobs; running that of
	// running jobs.
	inSystem, running resources
	queue             []pending
	head              int
	heap              []runningJob
	seq               int
	// blocked: the head fit no node when last tried; only the nodes freed
	// since (in freed) can take it now.
	blocked bool
	freed   []int
	// started, if set, hears of every start (jobs start in admission
	// order): for tests.
	started func(node int, at float64)
}

type pending struct {
	d        resources
	duration float64
}

type runningJob struct {
	finish float64
	seq    int
	node   int
	d      resources
}

func newFIFO(c Cluster, jobs int) *fifo {
	f := &fifo{total: c.total(), free: make([]resources, c.Nodes)}
	for i := range f.free {
		f.free[i] = c.Node.capacity()
	}
	f.queue = make([]pending, 0, min(jobs, 1<<12))
	return f
}

// load is the FIFO load now.
func (f *fifo) load() float64 { return f.total.share(f.inSystem) }

// utilization is the running jobs' demand on the most loaded resource,
// relative to capacity.
func (f *fifo) utilization() float64 { return f.total.share(f.running) }

// admit queues a job.
func (f *fifo) admit(d resources, duration float64) {
	if f.head > 0 && f.head == len(f.queue) {
		f.queue, f.head = f.queue[:0], 0
	} else if f.head >= 1<<12 && 2*f.head >= len(f.queue) {
		n := copy(f.queue, f.queue[f.head:])
		f.queue, f.head = f.queue[:n], 0
	}
	f.queue = append(f.queue, pending{d, duration})
	for k := range d {
		f.inSystem[k] += d[k]
	}
}

// startHeads starts jobs from the head of the queue at time t until the
// head fits no node.
func (f *fifo) startHeads(t float64) {
	for f.head < len(f.queue) {
		p := f.queue[f.head]
		// Best fit, as the simulator's fifo policy places: the node with
		// the fewest free GPUs that fits, the lowest-numbered among equals.
		// A blocked head fits only where GPUs were freed since.
		node := -1
		better := func(n int) bool {
			return f.free[n].fits(p.d) && (node < 0 || f.free[n][gpu] < f.free[node][gpu] ||
				(f.free[n][gpu] == f.free[node][gpu] && n < node))
		}
		if f.blocked {
			for _, n := range f.freed {
				if better(n) {
					node = n
				}
			}
		} else {
			for n := range f.free {
				if better(n) {
					node = n
				}
			}
		}
		f.freed = f.freed[:0]
		if node < 0 {
			f.blocked = true
			return
		}
		f.blocked = false
		f.head++
		for k := range p.d {
			f.free[node][k] -= p.d[k]
			f.running[k] += p.d[k]
		}
		f.push(runningJob{finish: t + p.duration, seq: f.seq, node: node, d: p.d})
		if f.started != nil {
			f.started(node, t)
		}
		f.seq++
	}
}

// completeNext finishes every running job with the earliest finish time
// and returns that time; ok is false when nothing runs.
func (f *fifo) completeNext() (t float64, ok bool) {
	if len(f.heap) == 0 {
		return 0, false
	}
	t = f.heap[0].finish
	for len(f.heap) > 0 && f.heap[0].finish == t {
		j := f.pop()
		for k := range j.d {
			f.free[j.node][k] += j.d[k]
			f.running[k] -= j.d[k]
			f.inSystem[k] -= j.d[k]
		}
		if f.blocked {
			f.freed = append(f.freed, j.node)
		}
	}
	return t, true
}

// nextFinish is the earliest finish time of a running job.
func (f *fifo) nextFinish() (float64, bool) {
	if len(f.heap) == 0 {
		return 0, false
	}
	return f.heap[0].finish, true
}

func (a runningJob) before(b runningJob) bool {
	if a.finish != b.finish {
		return a.finish < b.finish
	}
	return a.seq < b.seq
}

func (f *fifo) push(j runningJob) {
	h := append(f.heap, j)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	f.heap = h
}

func (f *fifo) pop() runningJob {
	h := f.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l].before(h[m]) {
			m = l
		}
		if r < n && h[r].before(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	f.heap = h
	return top
}

// replayFIFO schedules jobs (sorted by Submit) by FIFO from their Submit
// times on and returns the time averages of the FIFO load and of the
// utilization over the arrival window [first Submit, last Submit]; with a
// window of length 0 they are the values right after the arrivals.
// Completions at an instant are processed before arrivals at it, as
// fifoArrivals does. Every job must fit an empty node. started, if not
// nil, hears of every start.
func replayFIFO(jobs []trace.Job, c Cluster, started func(node int, at float64)) (load, util float64) {
	f := newFIFO(c, len(jobs))
	f.started = started
	start, end := jobs[0].Submit, jobs[len(jobs)-1].Submit
	prev := start
	var loadArea, utilArea float64
	for i := 0; i < len(jobs); {
		t := jobs[i].Submit
		if fin, ok := f.nextFinish(); ok && fin <= t {
			t = fin
		}
		loadArea += f.load() * (t - prev)
		utilArea += f.utilization() * (t - prev)
		prev = t
		if fin, ok := f.nextFinish(); ok && fin == t {
			f.completeNext()
		}
		for i < len(jobs) && jobs[i].Submit == t {
			f.admit(demandOf(jobs[i]), jobs[i].Duration)
			i++
		}
		f.startHeads(t)
	}
	if end == start {
		return f.load(), f.utilization()
	}
	return loadArea / (end - start), utilArea / (end - start)
}
