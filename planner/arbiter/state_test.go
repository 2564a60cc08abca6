package arbiter

import (
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// The recorded state round-trips: a policy that imports another's export
// exports the same bytes, last round included.
func TestStateRoundTrip(t *testing.T) {
	p := New(0.8, 600, nil)
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	p.leases[core.JobKey{Namespace: "default", ID: "a/b"}] = now.Add(time.Minute)
	p.first["app"], p.rounds, p.reserving = 12.5, 7, "app"
	p.target = map[string]bool{"n1": true}
	p.ran["app"] = true
	p.cont.Set(1, 3)
	p.marks["app"] = p.cont.Mark(2)
	p.last = &RoundReport{At: now, Round: 7, Offer: 8, Apps: []AppReport{{App: "app", Rho: 1.5, Bid: true, Won: 8}}}
	b, err := p.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	q := New(0.8, 600, nil)
	if err := q.ImportState(b); err != nil {
		t.Fatal(err)
	}
	c, err := q.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(c) {
		t.Fatalf("state changed in a round trip:\n%s\n%s", b, c)
	}
	if r, ok := q.LastRound(); !ok || r.Round != 7 || r.Apps[0].Won != 8 {
		t.Fatalf("last round after import: %+v, %v", r, ok)
	}
	if e, ok := q.LeaseEnd(core.JobKey{Namespace: "default", ID: "a/b"}); !ok || !e.Equal(now.Add(time.Minute)) {
		t.Fatalf("lease end after import: %v, %v", e, ok)
	}
	if err := q.ImportState([]byte("{not json")); err == nil {
		t.Fatal("a corrupt record was accepted")
	}
}

// A recorded state of any bytes is imported or refused, never a panic.
func FuzzImportState(f *testing.F) {
	p := New(0.8, 600, nil)
	p.leases[core.JobKey{Namespace: "default", ID: "j"}] = time.Unix(100, 0)
	b, _ := p.ExportState()
	f.Add(b)
	f.Add([]byte(`{"leases":{"nonamespace":"2026-01-01T00:00:00Z"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		q := New(0.8, 600, nil)
		if err := q.ImportState(b); err == nil {
			if _, err := q.ExportState(); err != nil {
				t.Fatalf("imported %q, cannot export: %v", b, err)
			}
		}
	})
}
