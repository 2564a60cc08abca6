package gittins

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestOnlineEmpty(t *testing.T) {
	o := NewOnline(nil)
	if o.Len() != 0 {
		t.Fatalf("Len = %d, want 0", o.Len())
	}
	if g := o.Index(0, 10); g != 0 {
		t.Fatalf("empty Index = %v, want 0", g)
	}
	if g := o.BestIndex(0); g != 0 {
		t.Fatalf("empty BestIndex = %v, want 0", g)
	}
	if err := o.Observe(4); err != nil {
		t.Fatal(err)
	}
	if g := o.Index(0, 4); g != 0.25 {
		t.Fatalf("after one job of size 4, Index(0, 4) = %v, want 1/4", g)
	}
}

func TestOnlineObserveRejects(t *testing.T) {
	o := NewOnline(mustNew(t, 1, 2))
	for _, tc := range []struct {
		size float64
		want string
	}{
		{math.NaN(), "NaN"},
		{-1, "negative"},
		{math.Inf(1), "not finite"},
		{1e301, "sum past"},
	} {
		if err := o.Observe(tc.size); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Observe(%v) error = %v, want it to contain %q", tc.size, err, tc.want)
		}
	}
	if o.Len() != 2 {
		t.Fatalf("rejected sizes were recorded: Len = %d", o.Len())
	}
}

// An Online fed a prior and observations in any order answers exactly as New
// over all the sizes, and a Distribution taken earlier does not change.
func TestOnlineMatchesNew(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		prior := randomSamples(r)
		o := NewOnline(mustNew(t, prior...))
		all := append([]float64(nil), prior...)
		before := o.Distribution()
		beforeIdx := before.Index(1, 5)
		for range r.IntN(4) {
			for range r.IntN(20) {
				s := randomSamples(r)[0]
				if err := o.Observe(s); err != nil {
					t.Fatal(err)
				}
				all = append(all, s)
			}
			want := mustNew(t, all...)
			if o.Len() != len(all) {
				t.Fatalf("Len = %d, want %d", o.Len(), len(all))
			}
			for _, a := range []float64{0, 0.5, 1, 3, 10, 1e3, 1e6} {
				for _, delta := range []float64{0.1, 1, 7, 1e4, math.Inf(1)} {
					if got, w := o.Index(a, delta), want.Index(a, delta); got != w {
						t.Fatalf("Online.Index(%v,%v) = %v, New gives %v", a, delta, got, w)
					}
				}
				if got, w := o.BestIndex(a), want.BestIndex(a); got != w {
					t.Fatalf("Online.BestIndex(%v) = %v, New gives %v", a, got, w)
				}
			}
		}
		if got := before.Index(1, 5); got != beforeIdx {
			t.Fatalf("earlier Distribution changed: %v -> %v", beforeIdx, got)
		}
	}
}
