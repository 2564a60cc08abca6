package policies

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// referenceRank is the ranking's definition, written plainly: a stable
// sort by level, key, key2, then FIFO order.
func referenceRank(jobs []*core.Job, level []int, key, key2 []float64) []*core.Job {
	type row struct {
		j       *core.Job
		l       int
		k, k2   float64
		written int
	}
	rows := make([]row, len(jobs))
	for i, j := range jobs {
		rows[i] = row{j, level[i], key[i], key2[i], i}
	}
	total := func(f float64) float64 { // NaN last, -0 == +0
		if math.IsNaN(f) {
			return math.Inf(1)
		}
		return f
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if c := cmp.Compare(a.l, b.l); c != 0 {
			return c
		}
		ak, bk := total(a.k), total(b.k)
		if c := cmp.Compare(ak, bk); c != 0 || (math.IsNaN(a.k) != math.IsNaN(b.k)) {
			if c == 0 {
				return cmp.Compare(boolInt(math.IsNaN(a.k)), boolInt(math.IsNaN(b.k)))
			}
			return c
		}
		ak2, bk2 := total(a.k2), total(b.k2)
		if c := cmp.Compare(ak2, bk2); c != 0 || (math.IsNaN(a.k2) != math.IsNaN(b.k2)) {
			if c == 0 {
				return cmp.Compare(boolInt(math.IsNaN(a.k2)), boolInt(math.IsNaN(b.k2)))
			}
			return c
		}
		return core.CompareFIFO(a.j, b.j)
	})
	out := make([]*core.Job, len(rows))
	for i, r := range rows {
		out[i] = r.j
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRankMatchesReference checks the fast ranking against its plain
// definition on random inputs: shuffled or FIFO-ordered jobs, few or many
// levels (negative and huge ones too), repeated keys, infinities, zeros of
// both signs and NaNs, nearly sorted and random key2.
func TestRankMatchesReference(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1, -1, 2.5, math.Inf(1), math.Inf(-1), math.NaN(), 1e300}
	for c := 0; c < 3000; c++ {
		rng := rand.New(rand.NewSource(int64(c)))
		n := rng.Intn(60)
		if c%50 == 0 {
			n = 2000 + rng.Intn(500)
		}
		jobs := make([]*core.Job, n)
		for i := range jobs {
			jobs[i] = &core.Job{Key: core.JobKey{Namespace: "ns", ID: fmt.Sprintf("j%04d", i)}, Submitted: time.Unix(int64(rng.Intn(n/3+1)), 0), Seq: uint64(rng.Intn(4))}
		}
		if rng.Intn(2) == 0 {
			core.SortFIFO(jobs)
		} else {
			rng.Shuffle(n, func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
		}
		// The keys belong to the jobs, whatever order they are ranked in.
		lvl, k1, k2 := map[*core.Job]int{}, map[*core.Job]float64{}, map[*core.Job]float64{}
		levels := 1 + rng.Intn(4)
		for i, j := range jobs {
			switch rng.Intn(20) {
			case 0:
				lvl[j] = -1 - rng.Intn(3)
			case 1:
				lvl[j] = maxBucketLevel + rng.Intn(3)
			default:
				lvl[j] = rng.Intn(levels)
			}
			if rng.Intn(2) == 0 {
				k1[j] = values[rng.Intn(len(values))]
			}
			switch rng.Intn(3) {
			case 0:
				k2[j] = math.Inf(1)
			case 1:
				k2[j] = float64(i) + float64(rng.Intn(5)) // nearly sorted
			default:
				k2[j] = values[rng.Intn(len(values))]
			}
		}
		if c%3 == 0 { // the common case: small levels only
			for j, l := range lvl {
				lvl[j] = max(0, min(l, levels))
			}
		}
		fifo := slices.Clone(jobs)
		core.SortFIFO(fifo)
		level, key, key2 := make([]int, n), make([]float64, n), make([]float64, n)
		for i, j := range fifo {
			level[i], key[i], key2[i] = lvl[j], k1[j], k2[j]
		}
		want := referenceRank(fifo, level, key, key2)
		r := newRankKeys(jobs)
		for i, j := range r.jobs {
			r.level[i], r.key[i], r.key2[i] = lvl[j], k1[j], k2[j]
		}
		r.sort()
		for i := range want {
			if jobs[i] != want[i] {
				t.Fatalf("case %d (n=%d): position %d is %s, want %s", c, n, i, jobs[i].Key, want[i].Key)
			}
		}
	}
}
