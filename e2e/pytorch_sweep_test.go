package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/httpapi"
)

// TestPyTorchSweepUnderThemis: Themis live with real training jobs. On the
// dev node (8 GPUs) a hyper-parameter sweep, app "sweep" of four 2-GPU
// PyTorch jobs that differ in their learning rate, runs beside app
// "other", one 4-GPU PyTorch job: 12 GPUs of demand. Every job reports
// its progress (iteration, total, loss) through the helper, so the
// arbiter knows each one's remaining time. The per-app view (/v1/apps,
// `themis status -apps`) is read through the run: the sweep's ρ moves
// from round to round as its jobs train; every job runs to completion;
// the invariant watcher sees no violation meanwhile.
func TestPyTorchSweepUnderThemis(t *testing.T) {
	needTorch(t)
	usePolicy(t, "themis", "themis.lease=20s")
	began := time.Now()
	seen0, _ := env.watcher.violations()
	type spec struct {
		id, app, lr string
		gpus, steps int
	}
	jobs := []spec{
		{"e2e-sweep-lr1e-3", "sweep", "1e-3", 2, 150}, {"e2e-sweep-lr2e-3", "sweep", "2e-3", 2, 150},
		{"e2e-sweep-lr3e-3", "sweep", "3e-3", 2, 150}, {"e2e-sweep-lr5e-3", "sweep", "5e-3", 2, 150},
		{"e2e-other", "other", "3e-3", 4, 250},
	}
	// The per-app view, every auction round, until every job is done.
	type round struct {
		n   uint64
		rho map[string]float64
		won map[string]int
	}
	// Every version of the per-app view, by blocking queries.
	var mu sync.Mutex
	var rounds []round
	ctx, stop := context.WithCancel(env.ctx)
	defer stop()
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		client := &httpapi.Client{Addr: env.apiURL}
		var index uint64
		for ctx.Err() == nil {
			var apps httpapi.AppsResponse
			idx, err := client.Get(ctx, "/v1/apps", index, 5*time.Second, &apps)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			index = idx
			mu.Lock()
			if apps.Policy == "themis" && apps.Round > 0 && (len(rounds) == 0 || rounds[len(rounds)-1].n != apps.Round) {
				r := round{n: apps.Round, rho: map[string]float64{}, won: map[string]int{}}
				for _, a := range apps.Apps {
					app := strings.TrimPrefix(a.App, "default:") // apps are scoped to their namespace
					r.rho[app], r.won[app] = a.Rho, a.Won
				}
				rounds = append(rounds, r)
			}
			mu.Unlock()
		}
	}()
	// Watching from before the first job arrives, so no round is missed.
	for _, s := range jobs {
		register(t, torchJob{gpus: s.gpus, grace: "10s", app: s.app, steps: s.steps, args: []string{"--lr", s.lr, "--log-every", "20"}}.build(t, s.id))
	}
	finals := map[string]string{}
	read := map[string]bool{} // complete allocations already read
	eventually(t, 4*time.Minute, "every job of both apps runs to completion", func() (bool, error) {
		time.Sleep(400 * time.Millisecond) // a poll every half second: Nomad limits connections per client
		for _, s := range jobs {
			if _, ok := finals[s.id]; ok {
				continue
			}
			for _, a := range allocs(t, s.id) {
				if a.ClientStatus == "failed" {
					t.Fatalf("%s failed:\n%s", s.id, trainStderr(env.nomad, a.ID))
				}
				if a.ClientStatus != "complete" || read[a.ID] {
					continue
				}
				read[a.ID] = true
				out, err := trainStdout(env.nomad, a.ID)
				if err != nil {
					return false, err
				}
				if d := trainDoneRE.FindStringSubmatch(out); d != nil {
					finals[s.id] = d[2]
				}
			}
		}
		if len(finals) < len(jobs) {
			return false, fmt.Errorf("%d of %d jobs done", len(finals), len(jobs))
		}
		return true, nil
	})
	stop()
	<-watching
	var lines []string
	moved := false
	for i, r := range rounds {
		lines = append(lines, fmt.Sprintf("round %d: sweep ρ %.2f won %d, other ρ %.2f won %d", r.n, r.rho["sweep"], r.won["sweep"], r.rho["other"], r.won["other"]))
		if _, ok := r.rho["sweep"]; ok && i > 0 {
			if prev, ok := rounds[i-1].rho["sweep"]; ok && prev != r.rho["sweep"] {
				moved = true
			}
		}
	}
	t.Logf("%s: all %d jobs done; the per-app view, round by round:\n%s", time.Since(began).Round(time.Millisecond), len(jobs), strings.Join(lines, "\n"))
	if !moved || len(rounds) < 3 {
		t.Errorf("the sweep's ρ did not move over %d auction rounds (want 3 or more)", len(rounds))
	}
	var res []string
	for id, loss := range finals {
		res = append(res, id+" final loss "+loss)
	}
	sort.Strings(res)
	t.Logf("the sweep: %s", strings.Join(res, "; "))
	for _, s := range jobs {
		if st := jobStatus(t, s.id); st == nil || st.State == "rejected" {
			t.Errorf("%s: status %+v", s.id, st)
		}
	}
	if seen, passes := env.watcher.violations(); seen != seen0 {
		t.Errorf("the invariant watcher saw %d violations during the sweep", seen-seen0)
	} else {
		t.Logf("the invariant watcher: 0 violations (%d snapshots so far in the run)", passes)
	}
}
