package nodesim_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// roundLog records a planner's rounds (planner.Config.OnRoundTime): how
// long each took, when each began (for the starts' split), and how many
// failed.
type roundLog struct {
	mu     sync.Mutex
	took   []time.Duration
	starts []time.Time
	failed int
}

// record is the planner's OnRoundTime.
func (l *roundLog) record(took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.took = append(l.took, took)
	l.starts = append(l.starts, time.Now().Add(-took))
	if err != nil {
		l.failed++
	}
}

// read is a copy of the rounds recorded so far: their times, their
// starts, and how many failed.
func (l *roundLog) read() ([]time.Duration, []time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.took), slices.Clone(l.starts), l.failed
}

// reset forgets the rounds recorded so far.
func (l *roundLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.took, l.starts, l.failed = nil, nil, 0
}

// startSplit is where one job's submit -> running went, read after the
// fact from what Nomad keeps: the first round that began after the
// submission (the planner's round starts, recorded by the test), the
// pin (the SubmitTime of the job's first version after the user's: the
// planner's register of the pinned job), the allocation's CreateTime (the
// scheduler placed it) and the task's StartedAt (the node ran it). All
// four clocks are this machine's.
type startSplit struct {
	toRound, roundToPin, pinToAlloc, allocToStart time.Duration
	round                                         int // index of the round that pinned it
}

// splitStart reads one job's split; ok is false when it has no pinned
// version or no started allocation (it queued, or never ran).
func splitStart(h *harness, id string, submitted time.Time, roundStarts []time.Time) (startSplit, bool, error) {
	versions, _, _, err := h.nomad.Jobs().Versions(id, false, nil)
	if err != nil {
		return startSplit{}, false, err
	}
	var pinned time.Time
	for _, v := range versions {
		if v.Version == nil || *v.Version == 0 || v.SubmitTime == nil {
			continue
		}
		at := time.Unix(0, *v.SubmitTime)
		if pinned.IsZero() || at.Before(pinned) {
			pinned = at
		}
	}
	allocs, _, err := h.nomad.Jobs().Allocations(id, true, nil)
	if err != nil {
		return startSplit{}, false, err
	}
	var created, started time.Time
	for _, a := range allocs {
		ts := a.TaskStates["train"]
		if ts == nil || ts.StartedAt.IsZero() {
			continue
		}
		if started.IsZero() || ts.StartedAt.Before(started) {
			started, created = ts.StartedAt, time.Unix(0, a.CreateTime)
		}
	}
	if pinned.IsZero() || started.IsZero() {
		return startSplit{}, false, nil
	}
	first := sortSearchTime(roundStarts, submitted)
	pinRound := sortSearchTime(roundStarts, pinned) - 1
	if first >= len(roundStarts) || pinRound < 0 {
		return startSplit{}, false, nil
	}
	return startSplit{
		toRound:      roundStarts[first].Sub(submitted),
		roundToPin:   pinned.Sub(roundStarts[first]),
		pinToAlloc:   created.Sub(pinned),
		allocToStart: started.Sub(created),
		round:        pinRound,
	}, true, nil
}

// sortSearchTime is the index of the first time in ts (sorted) at or
// after at.
func sortSearchTime(ts []time.Time, at time.Time) int {
	i, _ := slices.BinarySearchFunc(ts, at, func(a, b time.Time) int { return a.Compare(b) })
	return i
}

// splitSummary is the split's p50, p90, p99 and mean per part, and how
// many jobs each round that pinned any pinned.
func splitSummary(splits []startSplit) string {
	if len(splits) == 0 {
		return "no jobs"
	}
	parts := []struct {
		name string
		get  func(startSplit) time.Duration
	}{
		{"submit->round", func(s startSplit) time.Duration { return s.toRound }},
		{"round->pin", func(s startSplit) time.Duration { return s.roundToPin }},
		{"pin->alloc", func(s startSplit) time.Duration { return s.pinToAlloc }},
		{"alloc->start", func(s startSplit) time.Duration { return s.allocToStart }},
	}
	var b strings.Builder
	for _, p := range parts {
		var xs []float64
		for _, s := range splits {
			xs = append(xs, p.get(s).Seconds())
		}
		slices.Sort(xs)
		q := func(f float64) float64 { return xs[min(len(xs)-1, int(math.Ceil(f*float64(len(xs))))-1)] }
		fmt.Fprintf(&b, "%s p50 %.2fs p90 %.2fs p99 %.2fs mean %.2fs; ", p.name, q(0.5), q(0.9), q(0.99), meanOf(xs))
	}
	perRound := map[int]int{}
	for _, s := range splits {
		perRound[s.round]++
	}
	var counts []int
	for _, c := range perRound {
		counts = append(counts, c)
	}
	slices.Sort(counts)
	fmt.Fprintf(&b, "rounds that pinned %d, jobs pinned per such round p50 %d max %d", len(counts), counts[len(counts)/2], counts[len(counts)-1])
	return b.String()
}

// splitStarts reads the split of each job in ids; a job it cannot read
// fails the test.
func splitStarts(t *testing.T, h *harness, ids []string, submitted []time.Time, roundStarts []time.Time) []startSplit {
	t.Helper()
	var out []startSplit
	for i, id := range ids {
		s, ok, err := splitStart(h, id, submitted[i], roundStarts)
		if err != nil {
			t.Fatalf("the start of %s: %v", id, err)
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}
