package nodesim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/nodesim"
	"github.com/themis-nomad/themis/planner/core"
)

// TestChangeMarksAndSkippedRounds, against a real Consul and Nomad server
// with simulated nodes: the adapters' change marks (planner.ChangeMarker)
// stand while nothing is written and move with a job registered, an
// allocation that starts running and a Consul key written or deleted
// (under any prefix); a planner whose last round was steady skips the
// next with one request (Consul's KV index: Nomad's three table indexes
// are followed by blocking queries, planner/nomad/marks.go), and runs,
// granting, once a job is submitted; the client's own registration moves
// its mark at once.
func TestChangeMarksAndSkippedRounds(t *testing.T) {
	h := startServer(t, 2)
	startNodes(t, h, nodesim.Cluster(2, 2))
	nomadCalls, consulCalls := &counter{next: http.DefaultTransport}, &counter{next: http.DefaultTransport}
	p, nc, store := drivenPlanner(t, h, "fifo", core.Knobs{}, nomadCalls, consulCalls)

	// Steady: rounds until one is skipped (the nodes' registration and the
	// pending pool are writes the first rounds see).
	waitFor(t, 30*time.Second, "a skipped round", func() (bool, error) {
		before := p.Skipped()
		err := p.Reconcile(h.ctx)
		return p.Skipped() > before, err
	})
	nomadCalls.reset()
	consulCalls.reset()
	before, probes := p.Skipped(), nc.MarkProbes()
	if err := p.Reconcile(h.ctx); err != nil {
		t.Fatal(err)
	}
	nn, _ := nomadCalls.take()
	cn, _ := consulCalls.take()
	// (Nomad's answers counted here are the watches': a table that moved
	// after the marks were read, for the next round.)
	if p.Skipped() != before+1 || nc.MarkProbes() != probes || cn != 1 {
		t.Fatalf("a round with nothing changed: skipped %v, Nomad indexes asked for %d (watches' answers %d), Consul requests %d; want skipped with 0 and 1",
			p.Skipped() > before, nc.MarkProbes()-probes, nn, cn)
	}

	mark := func() (string, string) {
		t.Helper()
		n, err := nc.ChangeMark(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := store.ChangeMark(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n, c
	}
	n0, c0 := mark()
	if n1, c1 := mark(); n1 != n0 || c1 != c0 {
		t.Fatalf("marks moved with nothing written: Nomad %s -> %s, Consul %s -> %s", n0, n1, c0, c1)
	}
	if _, err := h.consul.KV().Put(&consulapi.KVPair{Key: "elsewhere/x", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	_, c1 := mark()
	if c1 == c0 {
		t.Fatalf("Consul's mark %s did not move with a key written outside themis/", c0)
	}
	if _, err := h.consul.KV().Delete("elsewhere/x", nil); err != nil {
		t.Fatal(err)
	}
	if _, c2 := mark(); c2 == c1 {
		t.Fatalf("Consul's mark %s did not move with a key deleted", c1)
	}

	// A submission: the next round runs and grants it; its allocation
	// running moves the allocations' index.
	if _, _, err := h.nomad.Jobs().Register(Job("mark-1", 8, "1h"), nil); err != nil {
		t.Fatal(err)
	}
	// Another client's write: its watch sees it a moment later.
	var n1 string
	waitFor(t, 5*time.Second, "Nomad's mark to move its jobs index", func() (bool, error) {
		n1, _ = mark()
		return field(n1, "jobs") != field(n0, "jobs"), nil
	})
	before = p.Skipped()
	if err := p.Reconcile(h.ctx); err != nil {
		t.Fatal(err)
	}
	if p.Skipped() != before {
		t.Fatal("the round after a submission was skipped")
	}
	// The planner's own write (its pin of mark-1): at once.
	if n, _ := mark(); field(n, "writes") == field(n1, "writes") {
		t.Fatalf("Nomad's mark %s did not count the round's own registration: %s", n1, n)
	}
	n1, _ = mark()
	waitFor(t, 30*time.Second, "mark-1 running", func() (bool, error) {
		allocs, _, err := h.nomad.Jobs().Allocations("mark-1", true, nil)
		if err != nil {
			return false, err
		}
		for _, a := range allocs {
			if a.ClientStatus == nomadapi.AllocClientStatusRunning {
				return true, nil
			}
		}
		return false, nil
	})
	waitFor(t, 5*time.Second, "Nomad's mark to move its allocations index with an allocation placed and running", func() (bool, error) {
		n2, _ := mark()
		return field(n2, "allocs") != field(n1, "allocs"), nil
	})
}

// field is one "name=value" of a Nomad change mark.
func field(mark, name string) string {
	for _, f := range strings.Fields(mark) {
		if strings.HasPrefix(f, name+"=") {
			return f
		}
	}
	return ""
}
