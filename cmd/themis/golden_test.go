package main

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/sim"
	"github.com/themis-nomad/themis/planner/stack"
)

// The Themis golden test: the themis policy's every decision and result on
// fixed inputs, as hashes in testdata/themis-golden.txt, so that a
// refactoring that changes any of them fails. -golden.update rewrites the
// file; -golden.dump DIR writes each case's full record there, to diff two
// versions.
var (
	goldenUpdate = flag.Bool("golden.update", false, "rewrite testdata/themis-golden.txt")
	goldenDump   = flag.String("golden.dump", "", "write each golden case's full record to this folder")
)

const goldenFile = "testdata/themis-golden.txt"

// goldenCase is one simulation: what `themis sim` would run with these
// options (one policy, no sweep).
type goldenCase struct {
	name string
	o    simOptions
}

func goldenCases(t *testing.T) []goldenCase {
	sixty := sixtyJobs(t)
	philly := defaultPhilly()
	if _, err := os.Stat(philly); err != nil {
		t.Skip("philly.csv not found")
	}
	w2 := func(sets ...string) simOptions {
		return simOptions{workload: "themis-w2", trace: philly, cluster: "themis", policy: "themis",
			sets: append([]string{"workload.apps=30"}, sets...)}
	}
	return []goldenCase{
		// Workload 2, light and at eight times the load (reservations,
		// early lease ends), with and without the rule (the last case under
		// its old knob spelling, themis.revoke), other f and lease.
		{"w2-apps30", w2()},
		{"w2-apps30-arrivals0.125", w2("workload.arrival_scale=0.125")},
		{"w2-apps30-arrivals0.25-norevoke-f0.5-lease5m", w2("workload.arrival_scale=0.25", "themis.revoke=off", "themis.f=0.5", "themis.lease=5m")},
		// Workload 1's small jobs.
		{"w1-apps10-arrivals0.25", simOptions{workload: "themis-w1", trace: philly, cluster: "themis", policy: "themis",
			sets: stringList{"workload.apps=10", "workload.arrival_scale=0.25"}}},
		// The 60-job trace (no apps: each job is one) on 8 GPUs.
		{"60job-n2g4", simOptions{trace: sixty, cluster: "n2g4", policy: "themis"}},
		{"60job-n2g4-lease2m", simOptions{trace: sixty, cluster: "n2g4", policy: "themis", sets: stringList{"themis.lease=2m"}}},
		// Figure 18: truthful, and app-0001 lying both ways, with four
		// gangs per app.
		{"fig18-jobs4", simOptions{workload: "themis-fig18", cluster: "themis-fig18", policy: "themis",
			sets: stringList{"workload.fig18_jobs=4", "workload.fig18_duration=1h"}}},
		{"fig18-jobs4-lie+100", simOptions{workload: "themis-fig18", cluster: "themis-fig18", policy: "themis",
			sets: stringList{"workload.fig18_jobs=4", "workload.fig18_duration=1h", "themis.lie=app-0001:+100%"}}},
		{"fig18-jobs1-lie-50", simOptions{workload: "themis-fig18", cluster: "themis-fig18", policy: "themis",
			sets: stringList{"themis.lie=app-0001:-50%"}}},
	}
}

// recorder forwards to the themis policy and writes every Allocate's
// answer and every NextChange (the lease ends) to a record.
type recorder struct {
	core.Policy
	caps    core.Capabilities
	alloc   core.Allocator
	recheck core.RecheckAfter
	w       io.Writer
}

func (r *recorder) Allocate(now time.Time, jobs []*core.Job, free *core.FreeGPUs, held []core.Grant) ([]core.Grant, []core.JobKey) {
	grants, stop := r.alloc.Allocate(now, jobs, free, held)
	if len(grants)+len(stop) > 0 {
		fmt.Fprintf(r.w, "allocate %s\n", fnum(float64(now.UnixNano())/1e9))
		for _, g := range grants {
			fmt.Fprintf(r.w, "  grant %s node=%s gpus=%s\n", g.Job, g.Node, strings.Join(g.GPUs, "+"))
		}
		for _, k := range stop {
			fmt.Fprintf(r.w, "  stop %s\n", k)
		}
	}
	return grants, stop
}

func (r *recorder) NextChange(now time.Time, jobs []*core.Job) time.Time {
	next := r.recheck.NextChange(now, jobs)
	if !next.IsZero() {
		fmt.Fprintf(r.w, "next %s\n", fnum(float64(next.UnixNano())/1e9))
	}
	return next
}

func (r *recorder) Seed(s int64) { r.caps.Seeder.Seed(s) }
func (r *recorder) Err() error   { return r.caps.Failer.Err() }

// Capabilities implements core.Policy: the recorder's own, so that the
// simulator allocates, rechecks, seeds and asks for errors through it.
func (r *recorder) Capabilities() core.Capabilities {
	return core.Capabilities{Policy: r, Allocator: r, Rechecker: r, Seeder: r, Failer: r}
}

// fnum writes a float exactly (the shortest text that reads back to the
// same bits).
func fnum(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// runGolden runs one case and writes its record: the decisions, then every
// job's and app's result. It returns the max ρ and the count of
// allocations, for the file's readers.
func runGolden(t *testing.T, gc goldenCase, w io.Writer) (maxRho float64, rounds int) {
	t.Helper()
	o := gc.o
	knobs, err := core.ParseKnobs(o.sets)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := loadJobs(o, knobs)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.FromPresetOrFile(o.cluster)
	if err != nil {
		t.Fatal(err)
	}
	ckpt, restore, err := sim.Costs(knobs)
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Build(o.policy, stack.Options{Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	if err := knobs.Unused(); err != nil {
		t.Fatal(err)
	}
	count := &countingWriter{w: w}
	rec := &recorder{Policy: st.Policy, caps: st.Caps, alloc: st.Caps.Allocator, recheck: st.Caps.Rechecker, w: count}
	r, err := sim.Run(sim.Config{Trace: tr, Cluster: cl, Policy: rec, Seed: 1, CheckpointCost: ckpt, RestoreCost: restore,
		Victims: st.Victims, VictimTie: st.VictimTie})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.Jobs {
		fmt.Fprintf(w, "job %s app=%s phase=%d gpus=%d submit=%s start=%s end=%s queue=%s preemptions=%d started=%v finished=%v placement=%s\n",
			j.ID, j.App, j.Phase, j.GPUs, fnum(j.Submit), fnum(j.Start), fnum(j.End), fnum(j.Queue), j.Preemptions, j.Started, j.Finished, fnum(j.Placement))
	}
	maxRho = math.Inf(-1)
	for _, a := range r.Apps {
		fmt.Fprintf(w, "app %s arrival=%s end=%s finished=%v navg=%s ideal=%s rho=%s placement=%s\n",
			a.ID, fnum(a.Arrival), fnum(a.End), a.Finished, fnum(a.NAvg), fnum(a.Ideal), fnum(a.Rho), fnum(a.Placement))
		maxRho = max(maxRho, a.Rho)
	}
	fmt.Fprintf(w, "makespan=%s preemptions=%d lost=%s\n", fnum(r.Makespan), r.Preemptions, fnum(r.LostWork))
	return maxRho, count.allocs
}

type countingWriter struct {
	w      io.Writer
	allocs int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), "allocate ") {
		c.allocs++
	}
	return c.w.Write(b)
}

// TestThemisGolden: the themis policy decides exactly as recorded in
// testdata/themis-golden.txt on every case (see goldenCases): the same
// grants and preemptions at the same times, the same lease ends, every
// job's start and finish and every app's ρ, bit for bit.
func TestThemisGolden(t *testing.T) {
	want := map[string]string{}
	if b, err := os.ReadFile(goldenFile); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && !strings.HasPrefix(line, "#") {
				want[f[0]] = f[1]
			}
		}
	} else if !*goldenUpdate {
		t.Fatal(err)
	}
	var lines []string
	for _, gc := range goldenCases(t) {
		var h hash.Hash = sha256.New()
		var w io.Writer = h
		var dump *os.File
		if *goldenDump != "" {
			var err error
			if dump, err = os.Create(filepath.Join(*goldenDump, gc.name+".txt")); err != nil {
				t.Fatal(err)
			}
			w = io.MultiWriter(h, dump)
		}
		bw := bufio.NewWriter(w)
		start := time.Now()
		maxRho, rounds := runGolden(t, gc, bw)
		t.Logf("%s: %d allocations in %v", gc.name, rounds, time.Since(start).Round(time.Millisecond))
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if dump != nil {
			dump.Close()
		}
		sum := fmt.Sprintf("%x", h.Sum(nil))
		lines = append(lines, fmt.Sprintf("%s %s allocations=%d max_rho=%s", gc.name, sum, rounds, fnum(maxRho)))
		if !*goldenUpdate && want[gc.name] != sum {
			t.Errorf("%s: record %s, want %s (run with -golden.dump DIR on both versions and diff)", gc.name, sum, want[gc.name])
		}
	}
	if *goldenUpdate {
		slices.Sort(lines)
		out := "# TestThemisGolden (golden_test.go): case, sha256 of its record, allocations that changed something, max rho.\n" +
			strings.Join(lines, "\n") + "\n"
		if err := os.WriteFile(goldenFile, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The early-end knobs' old spellings (themis.revoke*, before #34) and new
// ones (themis.early_end*) run the same simulation, record for record; the
// record hashes no knob names, so the golden case under the old spelling
// holds for the new one too. A target ρ of 0.5 changes the record from the
// default, and turning the rule off changes it from that, so a knob read
// under neither name would show.
func TestEarlyEndKnobSpellingsSimulateAlike(t *testing.T) {
	philly := defaultPhilly()
	if _, err := os.Stat(philly); err != nil {
		t.Skip("philly.csv not found")
	}
	record := func(sets ...string) string {
		var b strings.Builder
		runGolden(t, goldenCase{name: "spelling", o: simOptions{workload: "themis-w2", trace: philly, cluster: "themis", policy: "themis",
			sets: append([]string{"workload.apps=30", "workload.arrival_scale=0.25"}, sets...)}}, &b)
		return b.String()
	}
	def := record()
	oldTarget := record("themis.revoke_rho=0.5", "themis.revoke_victim=target")
	if newTarget := record("themis.early_end_rho=0.5", "themis.early_end_victim=target"); newTarget != oldTarget {
		t.Error("themis.early_end_rho=0.5 and themis.early_end_victim=target simulate unlike their old spellings")
	}
	if oldTarget == def {
		t.Fatal("a target ρ of 0.5 simulates as the default: the test cannot tell a knob read from one ignored")
	}
	oldOff := record("themis.revoke=off", "themis.revoke_rho=0.5")
	if newOff := record("themis.early_end=off", "themis.early_end_rho=0.5"); newOff != oldOff {
		t.Error("themis.early_end=off simulates unlike themis.revoke=off")
	}
	if oldOff == oldTarget || oldOff == record("themis.revoke_rho=0.5") {
		t.Error("themis.revoke=off simulates as on: the test cannot tell a knob read from one ignored")
	}
}
