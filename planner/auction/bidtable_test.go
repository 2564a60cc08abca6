package auction

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// wildApp is a random app that goes where the bid table's shortcuts must
// hold: several gangs (list schedules on many GPUs), jobs with no work
// left, slowdowns that make 2 GPUs slower than 1, running jobs of every
// class, successive halving with and without a later demand.
func wildApp(rng *rand.Rand, id string) App {
	a := App{ID: id, Elapsed: float64(rng.IntN(5000)), NAvg: 1 + 5*rng.Float64()}
	switch rng.IntN(4) {
	case 0:
		a.Sens = Sensitivity{1, 1 + 3*rng.Float64(), 0}
	case 1:
		a.Sens = Sensitivity{1, 1, 1}
	default:
		a.Sens = Sensitivity{1, 1 + rng.Float64()/2, 0}
	}
	if a.Sens[2] == 0 {
		a.Sens[2] = a.Sens[1] + rng.Float64()
	}
	nj := 1 + rng.IntN(8)
	for i := 0; i < nj; i++ {
		d := 1 + rng.IntN(40)
		total := float64(1 + rng.IntN(500))
		j := Job{ID: fmt.Sprintf("%s/%d", id, i), IterTime: float64(1 + rng.IntN(60)), ItersTotal: total, ItersLeft: float64(rng.IntN(int(total) + 1)), Demand: d}
		if rng.IntN(8) == 0 {
			j.ItersLeft = 0
		}
		switch rng.IntN(3) {
		case 0:
			j.Gang = d
		case 1:
			j.Gang = rng.IntN(d + 1)
		}
		if rng.IntN(5) == 0 {
			j.Held, j.HeldClass = j.gang()+rng.IntN(d-j.gang()+1), Class(rng.IntN(NumClasses))
		}
		a.Jobs = append(a.Jobs, j)
	}
	if rng.IntN(2) == 0 {
		a.Halving = &Halving{Iters: []float64{float64(rng.IntN(50)), float64(10 + rng.IntN(80)), float64(rng.IntN(200))}[:1+rng.IntN(3)]}
		if rng.IntN(2) == 0 {
			a.Halving.Demand = 1 + rng.IntN(50)
		}
	}
	if rng.IntN(4) == 0 {
		a.Budget = a.budget() * (1 + rng.Float64())
	}
	return a
}

// checkBidTable compares Bid's table with SharedTime, bit for bit.
func checkBidTable(t *testing.T, a *App, env Env) {
	t.Helper()
	v, err := Bid(a, env)
	if err != nil {
		t.Fatal(err)
	}
	tid := a.IdealTime(env.ClusterGPUs)
	for k := 1; k <= v.MaxGPUs(); k++ {
		for c := range Class(NumClasses) {
			if got, want := v.Rho(k, c), a.bidEntry(k, c, tid, v.Rho0); !sameFloat(got, want) {
				t.Fatalf("app %+v: ρ(%d, %s) = %v, SharedTime gives %v", a, k, c, got, want)
			}
		}
	}
}

// TestBidTableMatchesSharedTime checks the bid table against the
// straightforward SharedTime(k, c) / T_id, bit for bit, on random apps of
// the rest of the tests, wild ones, and the benchmarks' apps.
func TestBidTableMatchesSharedTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for trial := 0; trial < 3000; trial++ {
		env := Env{ClusterGPUs: 1 + rng.IntN(300), Lease: DefaultLease}
		if rng.IntN(5) == 0 {
			env.MaxBid = 1 + rng.IntN(100)
		}
		var a App
		if trial%3 == 0 {
			a = randomApp(rng, fmt.Sprintf("r%d", trial), env.ClusterGPUs)
		} else {
			a = wildApp(rng, fmt.Sprintf("w%d", trial))
		}
		if a.Validate() != nil {
			continue
		}
		checkBidTable(t, &a, env)
	}
	for _, bc := range []struct{ gpus, scale int }{{256, 1}, {4096, 16}} {
		rng := rand.New(rand.NewPCG(1, 2))
		apps := scaledApps(rng, 200, bc.gpus, bc.scale)
		for i := range apps {
			if bc.gpus > 256 && testing.Short() && i%10 != 0 {
				continue
			}
			checkBidTable(t, &apps[i], Env{ClusterGPUs: bc.gpus, Lease: DefaultLease})
		}
	}
}

// TestListScheduleTime checks the counted free list against listSchedule.
func TestListScheduleTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := 0; trial < 20000; trial++ {
		ts := make([]task, 1+rng.IntN(8))
		maxGang := 0
		for i := range ts {
			d := 1 + rng.IntN(20)
			ts[i] = task{float64(rng.IntN(4)) * float64(1+rng.IntN(100)), d, 1 + rng.IntN(d)}
			maxGang = max(maxGang, ts[i].gang)
		}
		s := Sensitivity{1, 1 + rng.Float64(), 3}
		p := maxGang + rng.IntN(60)
		for c := range Class(NumClasses) {
			want, _ := listSchedule(ts, p, s, c, false)
			if got := listScheduleTime(ts, p, s, c); !sameFloat(got, want) {
				t.Fatalf("tasks %v on %d GPUs, %s: %v, listSchedule %v", ts, p, c, got, want)
			}
		}
	}
}

// TestPhaseSweep checks phaseSweep against phaseTime for GPU counts that
// rise, repeat and jump.
func TestPhaseSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for trial := 0; trial < 3000; trial++ {
		ts := make([]task, 1+rng.IntN(6))
		for i := range ts {
			d := 1 + rng.IntN(30)
			ts[i] = task{float64(rng.IntN(5)) * float64(1+rng.IntN(50)), d, 1}
			if rng.IntN(2) == 0 {
				ts[i].gang = 1 + rng.IntN(d)
			}
			if i > 0 && rng.IntN(3) == 0 {
				ts[i] = ts[i-1] // identical tasks
			}
		}
		s := Sensitivity{1, 1 + 2*rng.Float64(), 0}
		s[2] = s[1] + rng.Float64()
		for c := range Class(NumClasses) {
			e := newPhaseSweep(ts, s, c)
			for p := 0; p < 150; p += rng.IntN(4) {
				want, _ := phaseTime(ts, p, s, c, false)
				if got := e.time(p); !sameFloat(got, want) {
					t.Fatalf("tasks %v on %d GPUs, %s: %v, phaseTime %v", ts, p, c, got, want)
				}
			}
		}
	}
}

// TestNeedSorted checks needSorted against need's scan, at run times
// themselves (ties) and between them.
func TestNeedSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for trial := 0; trial < 20000; trial++ {
		d := 1 + rng.IntN(200)
		tk := task{float64(rng.IntN(3)) * rng.Float64() * 1e4, d, 1 + rng.IntN(d)}
		if rng.IntN(2) == 0 {
			tk.gang = 1
		}
		s := Sensitivity{1, 1 + 3*rng.Float64(), 5}
		c := Class(rng.IntN(NumClasses))
		p := 1 + rng.IntN(250)
		T := taskTime(tk, 1+rng.IntN(d), s, c)
		switch rng.IntN(3) {
		case 0:
			T *= 1 + 1e-3*rng.Float64()
		case 1:
			T *= 1 - 1e-3*rng.Float64()
		}
		if got, want := needSorted(tk, T, p, s, c), need(tk, T, p, s, c); got != want {
			t.Fatalf("task %+v, T %v, %d GPUs, %s: %d, need %d", tk, T, p, c, got, want)
		}
	}
}
