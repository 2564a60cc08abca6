package hived

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

var restartExact = flag.Bool("hived.exact", true, "restart test: adopt with the jobs' virtual GPUs")

// rebuild is what a restarted planner does: a fresh Cluster from the same
// nodes (with the GPUs' current health) and config, then every job adopted
// in the order it was first allocated.
func rebuild(c *Cluster, exact bool) (*Cluster, error) {
	nodes := make([]core.Node, len(c.nodes))
	for i, n := range c.nodes {
		n.Schedulable = true
		n.GPUs = append([]core.GPU(nil), n.GPUs...)
		for k := range n.GPUs {
			n.GPUs[k].Healthy = c.Healthy(n.GPUs[k].ID)
		}
		nodes[i] = n
	}
	nc, err := New(nodes, c.Config())
	if err != nil {
		return nil, err
	}
	jobs := make([]*job, 0, len(c.jobs))
	for _, j := range c.jobs {
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].seq < jobs[b].seq })
	for _, j := range jobs {
		jv, _ := c.Job(j.key)
		var ids []string
		for _, g := range jv.Grants {
			ids = append(ids, g.GPUs...)
		}
		cells := jv.Cells
		if !exact {
			cells = nil
		}
		if err := nc.Adopt(Request{Job: j.key, VC: j.vcName, Priority: j.prio, GPUs: len(ids)}, ids, cells); err != nil {
			return nil, err
		}
	}
	return nc, nil
}

// twin runs one random sequence on a cluster that never stops and on one
// rebuilt at random points.
type twin struct {
	t         *testing.T
	seed      int64
	rng       *rand.Rand
	orig, re  *Cluster
	vcs, gpus []string
	next      int
	restarts  int
	skipped   int
}

func (w *twin) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("seed %d (rerun: go test ./planner/hived -run %s -hived.seed=%d -hived.cases=1 -hived.trace): %s",
		w.seed, w.t.Name(), w.seed, fmt.Sprintf(format, args...))
}

func (w *twin) logf(format string, args ...any) {
	if *propTrace {
		w.t.Logf(format, args...)
	}
}

func (w *twin) restart() {
	w.t.Helper()
	re, err := rebuild(w.re, *restartExact)
	if err != nil {
		w.fatalf("rebuild: %v", err)
	}
	w.logf("restart")
	if err := check(re); err != nil {
		w.fatalf("rebuilt cluster: %v", err)
	}
	w.compareViews(re)
	if doomed(w.re) > 0 {
		// The virtual GPUs doomed to bad hardware are history that the
		// jobs do not carry: the rebuilt cluster has them free again (see
		// the test's doc); keep running the one that did not restart.
		w.skipped++
		return
	}
	w.restarts++
	w.re = re
}

// doomed counts the virtual GPUs doomed to bad hardware.
func doomed(c *Cluster) int {
	n := 0
	for _, v := range c.VCs() {
		n += v.Doomed
	}
	return n
}

// compareViews: the jobs and their GPUs, the idle GPUs, and each VC's used
// and free GPUs agree (free GPUs up to the GPUs the original lost to bad
// hardware bound to the VC's cells, which a rebuild has not bound yet).
func (w *twin) compareViews(re *Cluster) {
	w.t.Helper()
	if a, b := w.orig.Jobs(), re.Jobs(); !reflect.DeepEqual(a, b) {
		w.fatalf("jobs %+v, rebuilt %+v", a, b)
	}
	if a, b := w.orig.IdleGPUs(), re.IdleGPUs(); a != b {
		w.fatalf("idle GPUs %d, rebuilt %d", a, b)
	}
	va, vb := w.orig.VCs(), re.VCs()
	for i := range va {
		a, b := va[i], vb[i]
		if a.Used != b.Used || a.Free+a.Doomed != b.Free+b.Doomed || a.GPUs != b.GPUs {
			w.fatalf("vc %s: used/free/doomed %d/%d/%d, rebuilt %d/%d/%d", a.Name, a.Used, a.Free, a.Doomed, b.Used, b.Free, b.Doomed)
		}
	}
}

func errKind(err error) error {
	for _, k := range []error{ErrNoCapacity, ErrUnknownVC, ErrInvalidRequest, ErrInfeasible} {
		if errors.Is(err, k) {
			return k
		}
	}
	return err
}

func (w *twin) alloc(req Request) {
	w.t.Helper()
	before := ""
	if *propTrace {
		before = w.dumpVC(req.VC)
	}
	a, err := w.orig.Allocate(req)
	b, rerr := w.re.Allocate(req)
	w.logf("%+v -> %v %v; rebuilt %v %v", req, a, err, b, rerr)
	if errKind(err) != errKind(rerr) {
		w.fatalf("%+v: %v, rebuilt: %v", req, err, rerr)
	}
	if !reflect.DeepEqual(a, b) {
		w.fatalf("%+v: %+v, rebuilt %+v\n%s", req, a, b, before)
	}
}

func (w *twin) step() {
	switch r := w.rng.Intn(100); {
	case r < 45 && len(w.vcs) > 0:
		vcName := w.vcs[w.rng.Intn(len(w.vcs))]
		cap := w.orig.vcByName[vcName].root.gpus
		sizes := []int{1, 1, 2, 2, 3, 4, 4, 6, 8, 8, 12, 16, cap, cap + 1}
		w.next++
		req := Request{Job: key(fmt.Sprintf("g%d", w.next)), VC: vcName, GPUs: sizes[w.rng.Intn(len(sizes))],
			Priority: w.rng.Intn(3), SingleNode: w.rng.Intn(5) == 0}
		if req.GPUs <= 0 {
			req.GPUs = 1
		}
		w.alloc(req)
	case r < 65:
		w.next++
		w.alloc(Request{Job: key(fmt.Sprintf("o%d", w.next)), GPUs: 1 + w.rng.Intn(10), Priority: Opportunistic, SingleNode: w.rng.Intn(4) == 0})
	case r < 90:
		jobs := w.orig.Jobs()
		if len(jobs) == 0 {
			return
		}
		k := jobs[w.rng.Intn(len(jobs))].Job
		w.logf("release %s", k)
		if !w.orig.Release(k) || !w.re.Release(k) {
			w.fatalf("release %s: not allocated in both", k)
		}
	default:
		id := w.gpus[w.rng.Intn(len(w.gpus))]
		healthy := !w.orig.Healthy(id) && w.rng.Intn(2) == 0
		w.logf("SetHealthy(%s, %v)", id, healthy)
		if err := w.orig.SetHealthy(id, healthy); err != nil {
			w.fatalf("%v", err)
		}
		if err := w.re.SetHealthy(id, healthy); err != nil {
			w.fatalf("%v", err)
		}
	}
}

// TestRestartEquivalence: random sequences of Allocate, Release and
// SetHealthy on a cluster that never stops and, in lockstep, on one rebuilt
// (New, then Adopt of every job in allocation order) at random points.
func TestRestartEquivalence(t *testing.T) {
	n := cases(10000)
	restarts, skipped := 0, 0
	for i := 0; i < n; i++ {
		seed := *propSeed + int64(i)
		rng := rand.New(rand.NewSource(seed))
		nodes := randomNodes(rng)
		cfg := randomConfig(rng, nodes)
		orig, err := New(nodes, cfg)
		if err != nil {
			t.Fatal(err)
		}
		re, _ := New(nodes, cfg)
		w := &twin{t: t, seed: seed, rng: rng, orig: orig, re: re}
		for _, v := range cfg.VCs {
			w.vcs = append(w.vcs, v.Name)
		}
		for id := range orig.gpus {
			w.gpus = append(w.gpus, id)
		}
		sort.Strings(w.gpus)
		for op, ops := 0, 20+rng.Intn(60); op < ops; op++ {
			if rng.Intn(6) == 0 {
				w.restart()
			}
			w.step()
		}
		if err := check(w.re); err != nil {
			w.fatalf("rebuilt cluster: %v", err)
		}
		restarts += w.restarts
		skipped += w.skipped
	}
	t.Logf("%d random cases, %d restarts, %d more rebuilt but not run on (doomed GPUs)", n, restarts, skipped)
}

// dumpVC renders a VC's cells and bindings in both clusters.
func (w *twin) dumpVC(name string) string {
	if w.orig.vcByName[name] == nil {
		return ""
	}
	out := fmt.Sprintf("vc %s %+v:\n", name, w.orig.Config())
	a, _ := w.orig.VirtualCells(name)
	b, _ := w.re.VirtualCells(name)
	for i := range a {
		out += fmt.Sprintf("  %-40s %-30s used %d bad %d %v | %-30s used %d bad %d %v\n", a[i].Name, a[i].Bound, a[i].Used, a[i].Bad, a[i].Jobs, b[i].Bound, b[i].Used, b[i].Bad, b[i].Jobs)
	}
	sa, sb := snap(w.orig), snap(w.re)
	out += fmt.Sprintf("pool %v demand %v\nrebuilt pool %v demand %v\n", sa.Pool, sa.Demand, sb.Pool, sb.Demand)
	pa, pb := w.orig.Physical(), w.re.Physical()
	for i := range pa {
		if !reflect.DeepEqual(pa[i], pb[i]) {
			out += fmt.Sprintf("  %+v\n  %+v\n", pa[i], pb[i])
		}
	}
	return out
}
