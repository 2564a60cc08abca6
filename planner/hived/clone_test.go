package hived

import (
	"fmt"
	"testing"
)

// TestCloneEquivalence: a clone is the same cluster, and a separate one.
// Random sequences of Allocate, Release and SetHealthy (TestRestartEquivalence's
// generator, bad GPUs and doomed virtual GPUs included) run in lockstep
// on a cluster and on a clone of it taken at random points; after each
// clone the whole state is the same (every cell, binding, free cell and
// VC demand), and every later decision is the same (success or error
// kind, GPUs, preempted jobs, virtual GPUs: twin.alloc with no
// divergence allowed). Unlike a rebuild, a clone keeps the doomed virtual
// GPUs too. Then, that the two are apart: the original's state before a
// run of random steps on the clone alone is its state after.
func TestCloneEquivalence(t *testing.T) {
	clones := 0
	for i := range cases(3000) {
		seed := *propSeed + int64(i)
		w := newTwin(t, seed, true, map[string]int{})
		w.re = w.orig.Clone()
		w.run(func() {
			w.re = w.orig.Clone()
			clones++
			if err := cloneChecks(w.orig, w.re); err != nil {
				w.fatalf("clone: %v", err)
			}
		})
		if err := cloneChecks(w.orig, w.re); err != nil {
			w.fatalf("after the steps: %v", err)
		}
		if len(w.diverged) > 0 {
			w.fatalf("a clone decided differently: %v", w.diverged)
		}
		// Apart: steps on a clone alone leave the original as it was.
		before := fmt.Sprintf("%+v %+v %+v", snap(w.orig), w.orig.Jobs(), w.orig.Physical())
		alone := &twin{t: t, seed: seed, rng: w.rng, orig: w.orig.Clone(), vcs: w.vcs, gpus: w.gpus, next: 1 << 20}
		alone.re = alone.orig.Clone()
		for range 20 {
			alone.step()
		}
		if after := fmt.Sprintf("%+v %+v %+v", snap(w.orig), w.orig.Jobs(), w.orig.Physical()); after != before {
			w.fatalf("steps on a clone changed the original:\nbefore %s\nafter  %s", before, after)
		}
		if err := check(w.orig); err != nil {
			w.fatalf("the original after steps on its clone: %v", err)
		}
	}
	t.Logf("%d clones", clones)
}

// cloneChecks: the clone is consistent, the same state as a, and its
// cells' preorder positions are where Clone looks for them.
func cloneChecks(a, b *Cluster) error {
	if err := check(b); err != nil {
		return err
	}
	if err := sameState(a, b); err != nil {
		return err
	}
	for i, x := range a.cells {
		if x.order != i {
			return fmt.Errorf("physical cell %s: order %d at index %d", x.name, x.order, i)
		}
	}
	for k, v := range a.vcs {
		walk := inPreorder(v.root, nil)
		if len(walk) != len(v.cells) || len(b.vcs[k].cells) != len(v.cells) {
			return fmt.Errorf("vc %s: %d cells in its tree, %d listed, %d in the clone's list", v.name, len(walk), len(v.cells), len(b.vcs[k].cells))
		}
		for i, x := range walk {
			if x.order != i || v.cells[i] != x || b.vcs[k].cells[i].order != i {
				return fmt.Errorf("vc %s: a cell of order %d in preorder position %d", v.name, x.order, i)
			}
		}
	}
	if fmt.Sprintf("%+v", a.Jobs()) != fmt.Sprintf("%+v", b.Jobs()) {
		return fmt.Errorf("jobs %+v, in the original %+v", b.Jobs(), a.Jobs())
	}
	return nil
}

// inPreorder appends x's tree to out in preorder, changing nothing.
func inPreorder(x *cell, out []*cell) []*cell {
	out = append(out, x)
	for _, ch := range x.children {
		out = inPreorder(ch, out)
	}
	return out
}
