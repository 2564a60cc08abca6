package hived

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strconv"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

var (
	propCases = flag.Int("hived.cases", 0, "random cases per property test (0: the default, 10000 for sharing safety; 2500 with -short)")
	propSeed  = flag.Int64("hived.seed", 1, "first seed of the property tests; case i uses seed+i")
	propTrace = flag.Bool("hived.trace", false, "log every operation of the property tests")
)

func (w *world) logf(format string, args ...any) {
	if *propTrace {
		w.t.Logf(format, args...)
	}
}

func cases(def int) int {
	if *propCases > 0 {
		return *propCases
	}
	if testing.Short() {
		return def / 4
	}
	return def
}

// world is a property-test run: the shared cluster, each VC's private
// cluster, and a model of who holds which GPU.
type world struct {
	t       *testing.T
	seed    int64
	rng     *rand.Rand
	shared  *Cluster
	private map[string]*Cluster
	vcs     []string
	holder  map[string]core.JobKey // GPU -> job, from the grants
	jobs    map[core.JobKey]Request
	bad     map[string]bool
	next    int
	// tainted VCs had bad hardware in their own cells, or got a cell with
	// bad GPUs while the healthy free cells could not host every VC's cells:
	// their private cluster no longer describes them.
	tainted map[string]bool
	// overflow gives opportunistic jobs a VC (a VC's overflow).
	overflow bool
}

func (w *world) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("seed %d (rerun: go test ./planner/hived -run %s -hived.seed=%d -hived.cases=1): %s",
		w.seed, w.t.Name(), w.seed, fmt.Sprintf(format, args...))
}

func newWorld(t *testing.T, seed int64) *world {
	rng := rand.New(rand.NewSource(seed))
	nodes := randomNodes(rng)
	cfg := randomConfig(rng, nodes)
	shared, err := New(nodes, cfg)
	w := &world{t: t, seed: seed, rng: rng, private: map[string]*Cluster{}, holder: map[string]core.JobKey{},
		jobs: map[core.JobKey]Request{}, bad: map[string]bool{}, tainted: map[string]bool{}}
	if err != nil {
		w.fatalf("New: %v", err)
	}
	w.shared = shared
	for _, v := range cfg.VCs {
		w.vcs = append(w.vcs, v.Name)
		pc, err := privateCluster(shared, v.Name)
		if err != nil {
			w.fatalf("%v", err)
		}
		w.private[v.Name] = pc
	}
	return w
}

// guaranteed makes a random guaranteed request in both the shared and the
// private cluster and checks that they agree.
func (w *world) guaranteed(hBefore bool) {
	vcName := w.vcs[w.rng.Intn(len(w.vcs))]
	cap := w.shared.vcByName[vcName].root.gpus
	sizes := []int{1, 1, 2, 2, 3, 4, 4, 6, 8, 8, 12, 16, cap, cap + 1}
	w.next++
	req := Request{Job: key(fmt.Sprintf("g%d", w.next)), VC: vcName, GPUs: sizes[w.rng.Intn(len(sizes))],
		Priority: w.rng.Intn(3), SingleNode: w.rng.Intn(5) == 0}
	if req.GPUs <= 0 {
		req.GPUs = 1
	}
	sa, serr := w.shared.Allocate(req)
	w.logf("%+v -> %v %v", req, sa, serr)
	pc := w.private[vcName]
	var pa Allocation
	perr := fmt.Errorf("no private cluster")
	if pc != nil {
		pa, perr = pc.Allocate(req)
	}
	if serr != nil && !errors.Is(serr, ErrNoCapacity) {
		w.fatalf("%+v: unexpected error %v", req, serr)
	}
	// In-VC preemptions must match the private cluster's.
	var inVC []core.JobKey
	for _, k := range sa.Preempt {
		if r := w.jobs[k]; r.Priority >= 0 {
			if r.VC != vcName || r.Priority >= req.Priority {
				w.fatalf("%+v preempted %s (vc %q priority %d)", req, k, r.VC, r.Priority)
			}
			inVC = append(inVC, k)
		}
	}
	strict := hBefore && !w.tainted[vcName]
	agree := (serr == nil) == (perr == nil) && reflect.DeepEqual(inVC, pa.Preempt)
	if !agree && strict {
		w.fatalf("%+v: shared cluster says %v (preempting %v), private cluster says %v (preempting %v)",
			req, serr, inVC, perr, pa.Preempt)
	}
	if agree && serr == nil {
		// The same virtual GPUs (the VC's cells have the same shape and
		// order in both) ...
		if sp, pp := vpaths(w.shared.jobs[req.Job].virt), vpaths(pc.jobs[req.Job].virt); !reflect.DeepEqual(sp, pp) {
			if strict {
				w.fatalf("%+v: virtual GPUs %v in the shared cluster, %v in the private one", req, sp, pp)
			}
			agree = false
		}
		// ... and, for a job inside one of the VC's cells, the same lowest
		// common physical cell.
		pl := lca(pc, allGPUs(pa))
		sl := lca(w.shared, allGPUs(sa))
		inTop := false
		for x := pl; x != nil; x = x.parent {
			inTop = inTop || x.alloc
		}
		if inTop && (pl.gpus != sl.gpus || pl.level != sl.level) {
			if strict {
				w.fatalf("%+v: lowest common cell %s%d in the shared cluster, %s%d in the private one", req, sl.level, sl.gpus, pl.level, pl.gpus)
			}
			agree = false
		}
	}
	if !agree {
		w.tainted[vcName] = true
	}
	if serr == nil {
		w.apply(req, sa)
	}
}

// vpaths names virtual GPUs by their child indices from the VC's root,
// sorted.
func vpaths(leaves []*cell) []string {
	var out []string
	for _, l := range leaves {
		p := ""
		for x := l; x.parent != nil; x = x.parent {
			p = "/" + strconv.Itoa(x.index) + p
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// apply records an allocation in the model, checking it against the model.
func (w *world) apply(req Request, a Allocation) {
	if a.Job != req.Job || a.GPUs() != req.GPUs {
		w.fatalf("%+v: allocation %+v", req, a)
	}
	pre := map[core.JobKey]bool{}
	for _, k := range a.Preempt {
		if _, ok := w.jobs[k]; !ok {
			w.fatalf("%+v preempted unknown job %s", req, k)
		}
		pre[k] = true
	}
	touched := map[core.JobKey]bool{}
	nodes := map[string]bool{}
	for _, g := range a.Grants {
		if nodes[g.Node] {
			w.fatalf("%+v: node %s granted twice", req, g.Node)
		}
		nodes[g.Node] = true
		for _, id := range g.GPUs {
			if w.shared.gpu(id) == nil || w.shared.gpu(id).node != g.Node {
				w.fatalf("%+v: GPU %s is not on node %s", req, id, g.Node)
			}
			if w.bad[id] {
				w.fatalf("%+v: got bad GPU %s", req, id)
			}
			if h, held := w.holder[id]; held {
				if !pre[h] {
					w.fatalf("%+v: GPU %s is held by %s, which it does not preempt", req, id, h)
				}
				touched[h] = true
			}
		}
	}
	if req.SingleNode && len(a.Grants) != 1 {
		w.fatalf("%+v: single-node job on %d nodes", req, len(a.Grants))
	}
	for k := range pre {
		if w.jobs[k].Priority < 0 && !touched[k] {
			w.fatalf("%+v preempted opportunistic job %s without needing its GPUs", req, k)
		}
		w.forget(k)
	}
	for _, id := range allGPUs(a) {
		w.holder[id] = req.Job
	}
	w.jobs[req.Job] = req
}

func (w *world) forget(k core.JobKey) {
	for id, h := range w.holder {
		if h == k {
			delete(w.holder, id)
		}
	}
	delete(w.jobs, k)
}

func (w *world) opportunistic() {
	w.next++
	req := Request{Job: key(fmt.Sprintf("o%d", w.next)), GPUs: 1 + w.rng.Intn(10), Priority: Opportunistic, SingleNode: w.rng.Intn(4) == 0}
	if w.overflow {
		// A VC's job that overflowed its cells (Placer.Overflow).
		req.VC = w.vcs[w.rng.Intn(len(w.vcs))]
	}
	a, err := w.shared.Allocate(req)
	w.logf("%+v -> %v %v", req, a, err)
	if err != nil {
		if !errors.Is(err, ErrNoCapacity) {
			w.fatalf("%+v: %v", req, err)
		}
		return
	}
	if len(a.Preempt) > 0 {
		w.fatalf("opportunistic %+v preempted %v", req, a.Preempt)
	}
	w.apply(req, a)
}

func (w *world) release() {
	if len(w.jobs) == 0 {
		return
	}
	keys := make([]core.JobKey, 0, len(w.jobs))
	for k := range w.jobs {
		keys = append(keys, k)
	}
	sortKeys(keys)
	k := keys[w.rng.Intn(len(keys))]
	w.releaseJob(k)
}

func (w *world) releaseJob(k core.JobKey) {
	req := w.jobs[k]
	w.logf("release %s", k)
	if !w.shared.Release(k) {
		w.fatalf("Release(%s): not allocated", k)
	}
	if w.shared.Release(k) {
		w.fatalf("Release(%s) twice", k)
	}
	if pc := w.private[req.VC]; pc != nil && req.Priority >= 0 {
		pc.Release(k)
	}
	w.forget(k)
}

func (w *world) check() {
	w.t.Helper()
	if err := check(w.shared); err != nil {
		w.fatalf("shared cluster: %v", err)
	}
	for name, pc := range w.private {
		if pc == nil {
			continue
		}
		if err := check(pc); err != nil {
			w.fatalf("private cluster of %s: %v", name, err)
		}
	}
	// The model and the cluster agree on who holds what.
	n := 0
	for _, jv := range w.shared.Jobs() {
		if _, ok := w.jobs[jv.Job]; !ok {
			w.fatalf("cluster has job %s the model does not", jv.Job)
		}
		for _, g := range jv.Grants {
			for _, id := range g.GPUs {
				if w.holder[id] != jv.Job {
					w.fatalf("GPU %s: cluster says %s, model says %s", id, jv.Job, w.holder[id])
				}
				n++
			}
		}
	}
	if n != len(w.holder) || len(w.jobs) != len(w.shared.jobs) {
		w.fatalf("model holds %d GPUs of %d jobs, cluster %d GPUs of %d jobs", len(w.holder), len(w.jobs), n, len(w.shared.jobs))
	}
}

// releaseAll releases every job and checks that the cluster is back where
// it started.
func (w *world) releaseAll(start snapshot) {
	keys := make([]core.JobKey, 0, len(w.jobs))
	for k := range w.jobs {
		keys = append(keys, k)
	}
	sortKeys(keys)
	w.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		w.releaseJob(k)
	}
	for id := range w.bad {
		if err := w.shared.SetHealthy(id, true); err != nil {
			w.fatalf("%v", err)
		}
	}
	w.check()
	if got := snap(w.shared); !reflect.DeepEqual(got, start) {
		for i := range got.Physical {
			if !reflect.DeepEqual(got.Physical[i], start.Physical[i]) {
				w.fatalf("after releasing everything, cell %+v, at the start %+v", got.Physical[i], start.Physical[i])
			}
		}
		w.fatalf("after releasing everything, pool %v demand %v, at the start %v %v", got.Pool, got.Demand, start.Pool, start.Demand)
	}
}

// TestSharingSafety: on random healthy clusters with random feasible VC
// assignments, random guaranteed and opportunistic requests and releases, a
// guaranteed request succeeds in the shared cluster exactly when it does in
// its VC's private cluster, preempting the same jobs of its VC (and only
// opportunistic jobs besides, whose GPUs it takes), with the same affinity;
// no GPU is ever held by two jobs; releasing everything restores the start.
func TestSharingSafety(t *testing.T) {
	n := cases(10000)
	for i := 0; i < n; i++ {
		w := newWorld(t, *propSeed+int64(i))
		start := snap(w.shared)
		for op, ops := 0, 20+w.rng.Intn(40); op < ops; op++ {
			switch r := w.rng.Intn(100); {
			case r < 50:
				w.guaranteed(true)
			case r < 70:
				w.opportunistic()
			default:
				w.release()
			}
			w.check()
		}
		w.releaseAll(start)
	}
	t.Logf("%d random cases", n)
}

// TestSharingSafetyWithOverflow is TestSharingSafety with opportunistic
// jobs that are VCs' overflow (hived-overflow: a VC's job run on idle GPUs
// outside its cells): a guaranteed job that fits its VC's private cells is
// still placed, preempting only opportunistic jobs besides its own VC's
// lower-priority ones, exactly as in the private cluster.
func TestSharingSafetyWithOverflow(t *testing.T) {
	n := cases(10000)
	for i := 0; i < n; i++ {
		w := newWorld(t, *propSeed+int64(i))
		w.overflow = true
		start := snap(w.shared)
		for op, ops := 0, 20+w.rng.Intn(40); op < ops; op++ {
			switch r := w.rng.Intn(100); {
			case r < 45:
				w.guaranteed(true)
			case r < 75:
				w.opportunistic()
			default:
				w.release()
			}
			w.check()
		}
		w.releaseAll(start)
	}
	t.Logf("%d random cases", n)
}

// healthyFeasible reports whether the free healthy cells can host every
// VC's unbound cells.
func healthyFeasible(c *Cluster) bool {
	count, left := make([]int, len(c.types)), make([]int, len(c.types))
	for _, p := range c.pool {
		for _, x := range p {
			healthyCounts(x, 1, count)
		}
	}
	return c.carve(count, c.demand, left) < 0
}

// badInBound lists the VCs with a bad GPU inside one of their bound cells.
func badInBound(c *Cluster) map[string]bool {
	out := map[string]bool{}
	for _, x := range c.cells {
		if x.alloc && x.bad > 0 {
			out[x.bound.vc.name] = true
		}
	}
	return out
}

// TestSharingSafetyBadGPUs adds GPUs going bad and good again: a VC whose
// own cells never held a bad GPU behaves exactly as its private cluster
// while the free healthy cells can host every VC's unbound cells, and no VC
// is then bound to a cell with a bad GPU; bad GPUs are never granted.
func TestSharingSafetyBadGPUs(t *testing.T) {
	n := cases(3000)
	for i := 0; i < n; i++ {
		w := newWorld(t, *propSeed+int64(i))
		start := snap(w.shared)
		gpus := make([]string, 0, len(w.shared.gpuAt))
		for id := range w.shared.gpuAt {
			gpus = append(gpus, id)
		}
		sort.Strings(gpus)
		for op, ops := 0, 20+w.rng.Intn(40); op < ops; op++ {
			hBefore := healthyFeasible(w.shared)
			taintedBefore := badInBound(w.shared)
			switch r := w.rng.Intn(100); {
			case r < 45:
				w.guaranteed(hBefore)
			case r < 62:
				w.opportunistic()
			case r < 85:
				w.release()
			default:
				id := gpus[w.rng.Intn(len(gpus))]
				healthy := w.bad[id] && w.rng.Intn(2) == 0
				if x := w.shared.gpu(id); !healthy && x.reserved {
					for a := x; a != nil; a = a.parent {
						if a.alloc {
							w.tainted[a.bound.vc.name] = true
						}
					}
				}
				w.logf("SetHealthy(%s, %v)", id, healthy)
				if err := w.shared.SetHealthy(id, healthy); err != nil {
					w.fatalf("%v", err)
				}
				if healthy {
					delete(w.bad, id)
				} else {
					w.bad[id] = true
				}
			}
			for name := range badInBound(w.shared) {
				if hBefore && !taintedBefore[name] && !w.tainted[name] {
					w.fatalf("vc %s was bound to a cell with a bad GPU although the healthy free cells could host every VC's cells", name)
				}
				w.tainted[name] = true
			}
			for _, v := range w.shared.VCs() {
				if v.Doomed > 0 {
					w.tainted[v.Name] = true
				}
			}
			w.check()
		}
		w.releaseAll(start)
	}
	t.Logf("%d random cases", n)
}

// TestReconfigureProperty: mid-run, a random new configuration (or the same
// one) replaces the old: the state stays consistent, kept jobs keep their
// GPUs, evicted jobs are gone, the same configuration evicts nothing, and
// releasing everything restores the new configuration's idle state.
func TestReconfigureProperty(t *testing.T) {
	n := cases(2000)
	for i := 0; i < n; i++ {
		w := newWorld(t, *propSeed+int64(i))
		for op, ops := 0, 10+w.rng.Intn(30); op < ops; op++ {
			switch r := w.rng.Intn(100); {
			case r < 55:
				w.guaranteed(true)
			case r < 75:
				w.opportunistic()
			default:
				w.release()
			}
		}
		before := map[core.JobKey][]core.Grant{}
		for _, j := range w.shared.Jobs() {
			before[j.Job] = j.Grants
		}
		same := w.rng.Intn(3) == 0
		cfg := w.shared.Config()
		if !same {
			cfg = randomConfig(w.rng, w.shared.nodes)
		}
		evicted, err := w.shared.Reconfigure(cfg)
		if err != nil {
			w.fatalf("Reconfigure: %v", err)
		}
		if same && len(evicted) > 0 {
			w.fatalf("the same configuration evicted %v", evicted)
		}
		for _, k := range evicted {
			if _, ok := w.shared.Job(k); ok {
				w.fatalf("evicted job %s is still allocated", k)
			}
			w.forget(k)
		}
		for k, g := range before {
			if _, gone := w.jobs[k]; !gone {
				continue
			}
			j, ok := w.shared.Job(k)
			if !ok || !reflect.DeepEqual(j.Grants, g) {
				w.fatalf("kept job %s: grants %v, before %v", k, j.Grants, g)
			}
		}
		if err := check(w.shared); err != nil {
			w.fatalf("after Reconfigure: %v", err)
		}
		// Carry on with the new VCs (private clusters no longer apply).
		w.vcs = nil
		for _, v := range cfg.VCs {
			w.vcs = append(w.vcs, v.Name)
			w.tainted[v.Name] = true
		}
		w.private = map[string]*Cluster{}
		fresh, err := New(w.shared.nodes, cfg)
		if err != nil {
			w.fatalf("%v", err)
		}
		for op := 0; op < 20; op++ {
			switch r := w.rng.Intn(100); {
			case r < 50:
				if len(w.vcs) > 0 {
					w.guaranteed(false)
				}
			case r < 70:
				w.opportunistic()
			default:
				w.release()
			}
			w.check()
		}
		w.releaseAll(snap(fresh))
	}
	t.Logf("%d random cases", n)
}
