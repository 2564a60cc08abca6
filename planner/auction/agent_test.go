package auction

import (
	"math"
	"strings"
	"testing"
)

// TestBidTable checks the bid against Equation 1 directly and against the
// paper's Table 3 shape: entries up to the queued demand, +Inf where the app
// cannot run or would rather wait.
func TestBidTable(t *testing.T) {
	env := Env{ClusterGPUs: 16, Lease: 600}
	a := singleJob()
	a.Jobs[0].Gang = 2
	v, err := Bid(&a, env)
	if err != nil {
		t.Fatal(err)
	}
	if v.MaxGPUs() != 4 {
		t.Errorf("bids for up to %d GPUs, want the demand 4", v.MaxGPUs())
	}
	if !near(v.Rho0, a.RhoWait(env)) {
		t.Errorf("ρ_old %v, want %v", v.Rho0, a.RhoWait(env))
	}
	for k := 0; k <= 6; k++ {
		for c := range Class(NumClasses) {
			want := a.Rho(k, c, 16)
			switch {
			case k == 0:
				want = a.RhoWait(env)
			case k > 4 || k < 2 || !(want < v.Rho0):
				want = math.Inf(1)
			}
			if got := v.Rho(k, c); !near(got, want) {
				t.Errorf("ρ(%d, %s) = %v, want %v", k, c, got, want)
			}
		}
	}
	// ρ_old is what waiting a lease and then running on 2 GPUs across
	// racks costs: every usable entry beats it.
	if !(v.Rho(2, CrossRack) < v.Rho0) {
		t.Errorf("ρ(2, cross-rack) %v does not beat ρ_old %v", v.Rho(2, CrossRack), v.Rho0)
	}
	// A running app does not bid.
	a.Jobs[0].Held = 4
	if v, _ := Bid(&a, env); v.MaxGPUs() != 0 {
		t.Errorf("running app bids for %d GPUs", v.MaxGPUs())
	}
	// A gang larger than the cluster never runs: no bid, ρ_old = +Inf.
	b := singleJob()
	b.Jobs[0].Gang = 4
	if v, _ := Bid(&b, Env{ClusterGPUs: 2, Lease: 600}); v.MaxGPUs() != 0 || !math.IsInf(v.Rho0, 1) {
		t.Errorf("oversized gang: max %d, ρ_old %v", v.MaxGPUs(), v.Rho0)
	}
}

func TestBidCache(t *testing.T) {
	env := Env{ClusterGPUs: 16, Lease: 600}
	c := NewBidCache()
	a := singleJob()
	v1, err := c.Bid(&a, env)
	if err != nil {
		t.Fatal(err)
	}
	same := singleJob() // equal state, another value
	if v2, _ := c.Bid(&same, env); v2 != v1 {
		t.Errorf("the same state was not answered from the cache")
	}
	changes := []func(*App, *Env){
		func(a *App, _ *Env) { a.Elapsed++ },
		func(a *App, _ *Env) { a.NAvg = 3 },
		func(a *App, _ *Env) { a.Jobs[0].ItersLeft-- },
		func(a *App, _ *Env) { a.Jobs[0].Held = 2 },
		func(a *App, _ *Env) { a.Sens = Sensitivity{1, 2, 3} },
		func(a *App, _ *Env) { a.Halving = &Halving{Iters: []float64{1}} },
		func(_ *App, e *Env) { e.Lease = 60 },
		func(_ *App, e *Env) { e.ClusterGPUs = 8 },
	}
	for i, change := range changes {
		b, e := singleJob(), env
		change(&b, &e)
		v, err := c.Bid(&b, e)
		if err != nil {
			t.Fatal(err)
		}
		if v == v1 {
			t.Errorf("change %d: stale bid from the cache", i)
		}
		want, _ := Bid(&b, e)
		if !near(v.Rho0, want.Rho0) || !near(v.Rho(2, SameRack), want.Rho(2, SameRack)) {
			t.Errorf("change %d: cached bid differs from a fresh one", i)
		}
		c.Bid(&a, env) // back to the original state
	}
	if c.Len() != 1 {
		t.Errorf("cache holds %d bids for one app", c.Len())
	}
	c.Forget(a.ID)
	if c.Len() != 0 {
		t.Errorf("Forget left %d bids", c.Len())
	}
	bad := singleJob()
	bad.Jobs[0].Demand = 0
	if _, err := c.Bid(&bad, env); err == nil {
		t.Errorf("invalid app bid")
	}
}

func TestNewValuation(t *testing.T) {
	inf := math.Inf(1)
	v, err := NewValuation("x", 2, [][NumClasses]float64{{1.5, 1.8, 2.5}, {inf, inf, inf}})
	if err != nil {
		t.Fatal(err)
	}
	if v.MaxGPUs() != 2 || v.Rho(1, SameRack) != 1.8 || !math.IsInf(v.Rho(1, CrossRack), 1) || !math.IsInf(v.Rho(3, SameMachine), 1) || v.Rho(0, CrossRack) != 2 {
		t.Errorf("valuation %+v", v)
	}
	for _, tc := range []struct {
		rho0 float64
		tab  [][NumClasses]float64
		want string
	}{
		{0, nil, "ρ_old"},
		{inf, nil, "ρ_old"},
		{2, [][NumClasses]float64{{1, math.NaN(), 1}}, "ρ(1, rack)"},
		{2, [][NumClasses]float64{{1, 1, -1}}, "ρ(1, cross-rack)"},
	} {
		if _, err := NewValuation("x", tc.rho0, tc.tab); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewValuation(%v, %v) error %v, want %q", tc.rho0, tc.tab, err, tc.want)
		}
	}
}

// TestOfferGains: per count, the best class the offer holds, least
// constrained among equals; counts that do not beat a smaller one refused.
func TestOfferGains(t *testing.T) {
	inf := math.Inf(1)
	v, _ := NewValuation("x", 4, [][NumClasses]float64{
		{2, 2, 2},       // 1 GPU: placement does not matter
		{1, 1.5, 3},     // 2 GPUs
		{0.9, 1, 1.1},   // 3 GPUs
		{1, 1, 1},       // 4 GPUs: no better than 3 on one machine
		{inf, 0.5, 0.6}, // 5 GPUs: no rack holds them
	})
	gains, classes := offerGains(v, [NumClasses]int{3, 4, 6})
	want := []struct {
		ok bool
		r  float64
		c  Class
	}{{}, {true, 2, CrossRack}, {true, 1, SameMachine}, {true, 0.9, SameMachine}, {false, 0, 0}, {true, 0.6, CrossRack}}
	if len(gains) != 6 {
		t.Fatalf("gains %v", gains)
	}
	for k := 1; k < len(want); k++ {
		w := want[k]
		if !w.ok {
			if !math.IsInf(gains[k], -1) {
				t.Errorf("k=%d: gain %v, want refused", k, gains[k])
			}
			continue
		}
		if !near(gains[k], math.Log(4/w.r)) || classes[k] != w.c {
			t.Errorf("k=%d: gain %v at %s, want log(4/%v) at %s", k, gains[k], classes[k], w.r, w.c)
		}
	}
	// Machines of 2: 3 GPUs must spread, and 3 in a rack (ρ 1) are no
	// better than 2 on a machine: refused.
	gains, classes = offerGains(v, [NumClasses]int{2, 3, 3})
	if len(gains) != 4 || !near(gains[2], math.Log(4)) || classes[2] != SameMachine || !math.IsInf(gains[3], -1) {
		t.Errorf("small offer: gains %v classes %v", gains, classes)
	}
}
