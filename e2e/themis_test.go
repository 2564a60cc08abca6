package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/stack"
)

// TestThemisLive runs Themis's auction on the 3-client dev cluster (24
// GPUs) with a 15 s lease: a 4-job sweep of 4 GPUs, and two 8-GPU apps,
// 32 GPUs of demand. Every lease key shows its end; at the first lease
// ends a round runs: a job whose lease is renewed keeps its allocation (no
// restart), one that loses its GPUs checkpoints and later resumes from its
// checkpoint, and the app that waited runs. The policy's memory is in
// Consul (themis/policy/themis).
func TestThemisLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 4*time.Minute)
	defer cancel()
	began := time.Now()
	m := startMultiCluster(t, ctx)
	st := mustStack(t, "themis", stack.Options{Knobs: mustKnobs(t, "themis.lease=15s")})
	// The planner's HTTP API, fed by its rounds, for /v1/apps.
	api := httpapi.New(httpapi.Options{ID: "e2e-themis"})
	api.SetLeading(true)
	ts := httptest.NewServer(api.Handler())
	defer ts.Close()
	m.runPlanner(t, ctx, st, func(c *planner.Config) { c.OnRound = api.Publish })
	type spec struct {
		id, app string
		gpus    int
	}
	jobs := []spec{{"sweep-0", "sweep", 4}, {"sweep-1", "sweep", 4}, {"sweep-2", "sweep", 4}, {"sweep-3", "sweep", 4},
		{"big", "big", 8}, {"late", "late", 8}}
	for i, s := range jobs {
		job := trainJob{gpus: s.gpus, steps: 3000, grace: "10s", app: s.app}.build(t, s.id)
		if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister(s.id, true, nil) })
		if i == 4 {
			time.Sleep(2 * time.Second) // "late" arrives after the first round
		}
	}
	firstAlloc := map[string]string{}
	eventually(t, 60*time.Second, "24 GPUs leased with lease ends", func() (bool, error) {
		held := 0
		for _, s := range jobs {
			l := m.lease(t, s.id)
			if l == nil || l.Revoke != nil {
				continue
			}
			if l.Ends.IsZero() || l.Ends.Before(l.GrantedAt) || l.Ends.After(l.GrantedAt.Add(15*time.Second+time.Second)) {
				return false, fmt.Errorf("%s: lease ends %v, granted %v", s.id, l.Ends, l.GrantedAt)
			}
			held += len(l.GPUs)
		}
		if held != 24 {
			return false, fmt.Errorf("%d GPUs leased", held)
		}
		return true, nil
	})
	for _, s := range jobs {
		if m.lease(t, s.id) == nil {
			continue
		}
		a, _, err := m.running(s.id)
		if err != nil {
			eventually(t, 30*time.Second, s.id+" runs", func() (bool, error) {
				a, _, err = m.running(s.id)
				return err == nil, err
			})
		}
		firstAlloc[s.id] = a.ID
	}
	if b, err := consul.NewStore(m.consul).PolicyState(ctx, "themis"); err != nil || len(b) == 0 {
		t.Fatalf("the arbiter's state is not in Consul: %v", err)
	}
	if b, err := consul.NewStore(m.consul).Auction(ctx); err != nil || !strings.Contains(string(b), `"app":"default:sweep"`) {
		t.Fatalf("the last auction round is not in Consul (%v): %s", err, b)
	}
	var apps httpapi.AppsResponse
	if _, err := (&httpapi.Client{Addr: ts.URL}).Get(ctx, "/v1/apps", 0, 0, &apps); err != nil {
		t.Fatalf("GET /v1/apps: %v", err)
	}
	won := 0
	for _, a := range apps.Apps {
		won += a.Won
		if a.Won > 0 && (a.LeaseEnds == "" || a.Placed == "") {
			t.Errorf("/v1/apps: %s won %d GPUs with no lease end or placement: %+v", a.App, a.Won, a)
		}
	}
	if apps.Policy != "themis" || apps.Round == 0 || len(apps.Apps) == 0 || won == 0 {
		t.Fatalf("/v1/apps %+v: want the last auction round with GPUs won", apps)
	}
	t.Logf("%s: first auction: %d jobs run; /v1/apps: round %d, %d apps", time.Since(began).Round(time.Millisecond), len(firstAlloc), apps.Round, len(apps.Apps))

	// Past the first lease ends: every job ran at some point, the ones
	// that kept their leases were not restarted, the others resumed.
	eventually(t, 120*time.Second, "every app ran and a lease moved", func() (bool, error) {
		for _, s := range jobs {
			as, _, err := m.nomad.Jobs().Allocations(s.id, false, nil)
			if err != nil {
				return false, err
			}
			if len(as) == 0 {
				return false, fmt.Errorf("%s never ran", s.id)
			}
		}
		moved := 0
		for id := range firstAlloc {
			as, _, _ := m.nomad.Jobs().Allocations(id, false, nil)
			if len(as) > 1 {
				moved++
			}
		}
		if moved == 0 {
			return false, fmt.Errorf("no job lost its first lease yet")
		}
		return true, nil
	})
	// A job that lost its lease wins GPUs again in a later round and
	// resumes from its checkpoint.
	eventually(t, 120*time.Second, "a job that lost its lease resumes from its checkpoint", func() (bool, error) {
		for id, first := range firstAlloc {
			as, _, err := m.nomad.Jobs().Allocations(id, false, nil)
			if err != nil {
				return false, err
			}
			for _, a := range as {
				if a.ID == first || a.ClientStatus != "running" {
					continue
				}
				out, err := allocStdout(m.nomad, a.ID)
				if err == nil && strings.Contains(out, "hello: restart count") && stepOf(resumedRE, out) >= 1 {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("none resumed yet")
	})
	kept, resumed := 0, 0
	for id, first := range firstAlloc {
		as, _, err := m.nomad.Jobs().Allocations(id, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 1 && as[0].ID == first {
			l := m.lease(t, id)
			if l != nil && l.Revoke == nil && l.Ends.After(l.GrantedAt.Add(16*time.Second)) {
				kept++ // renewed in place: the same allocation, a later end
			}
			continue
		}
		for _, a := range as {
			if a.ID == first || a.ClientStatus != "running" {
				continue
			}
			out, err := allocStdout(m.nomad, a.ID)
			if err == nil && strings.Contains(out, "hello: restart count") && stepOf(resumedRE, out) >= 1 {
				resumed++
			}
		}
	}
	t.Logf("%s: after the first lease ends: %d jobs renewed in place, %d resumed from their checkpoint", time.Since(began).Round(time.Millisecond), kept, resumed)
	if resumed == 0 {
		t.Fatal("no job resumed from its checkpoint")
	}
}
