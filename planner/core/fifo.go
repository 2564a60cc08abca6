package core

import (
	"cmp"
	"slices"
)

// FIFO order: jobs by submission time, then sequence (the adapters' create
// index, the simulator's trace order), then key. It is the model's own
// order of jobs, every policy's last tie-break and the order callers keep
// jobs in.

// CompareFIFO orders a before b (negative), after it (positive) or as
// equal (0) in FIFO order.
func CompareFIFO(a, b *Job) int {
	if c := a.Submitted.Compare(b.Submitted); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Key.Namespace, b.Key.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Key.ID, b.Key.ID)
}

// FIFOOrdered reports whether a comes no later than b in FIFO order.
func FIFOOrdered(a, b *Job) bool {
	switch a.Submitted.Compare(b.Submitted) {
	case -1:
		return true
	case 1:
		return false
	}
	return CompareFIFO(a, b) <= 0
}

// SortFIFO orders jobs by submission time, then sequence, then key.
func SortFIFO(jobs []*Job) {
	sorted := true
	for i := 1; i < len(jobs) && sorted; i++ {
		sorted = FIFOOrdered(jobs[i-1], jobs[i])
	}
	if sorted {
		return // the usual case: callers keep jobs in arrival order
	}
	slices.SortStableFunc(jobs, CompareFIFO)
}
