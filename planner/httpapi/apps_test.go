package httpapi

import (
	"strconv"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/arbiter"
)

// ?app= keeps one app; an unknown one gives an empty list.
func TestAppsFilter(t *testing.T) {
	_, ts := leader(t, themisFixture())
	for _, tc := range []struct {
		app  string
		want []string
	}{{"c", []string{"c"}}, {"nope", nil}} {
		_, _, body := get(t, ts, "/v1/apps?app="+tc.app)
		apps := at(t, body, "apps").([]any)
		var got []string
		for i := range apps {
			got = append(got, at(t, apps[i], "app").(string))
		}
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) || at(t, body, "round") != 4.0 {
			t.Errorf("?app=%s: %v, want apps %v of round 4", tc.app, body, tc.want)
		}
	}
}

// A blocking query on /v1/apps wakes when a new auction round is
// published, even when nothing else changed, and answers with it.
func TestAppsBlocking(t *testing.T) {
	v := themisFixture()
	s, ts := leader(t, v)
	idx := s.Index()
	next := themisFixture()
	next.Events = nil
	next.Auction = &arbiter.RoundReport{At: t0.Add(30 * time.Second), Round: 5, Offer: 2,
		Apps: []arbiter.AppReport{{App: "c", Rho: 2.8, RhoAfter: 1.4, Bid: true, Won: 2, Placed: "machine", C: 1, Lease: 30}}}
	time.AfterFunc(50*time.Millisecond, func() { s.Publish(next) })
	start := time.Now()
	_, h, body := get(t, ts, "/v1/apps?index="+strconv.FormatUint(idx, 10)+"&wait=5s")
	if took := time.Since(start); took < 40*time.Millisecond || took > 3*time.Second {
		t.Errorf("took %s, want the wait to end at the publish", took)
	}
	if got := indexOf(t, h); got <= idx {
		t.Errorf("index %d after %d: want a new index", got, idx)
	}
	if at(t, body, "round") != 5.0 || at(t, body, "apps", 0, "won") != 2.0 || at(t, body, "apps", 0, "lease_ends") != "2026-11-24T10:01:00Z" {
		t.Errorf("answer %v: want round 5", body)
	}
}

// An app is named with its namespace ("team-a:sweep"); a filter by its
// name alone keeps it in every namespace shown, by NS:NAME in one.
func TestAppIs(t *testing.T) {
	for _, c := range []struct {
		scoped, name string
		want         bool
	}{
		{"team-a:sweep", "sweep", true},
		{"team-a:sweep", "team-a:sweep", true},
		{"team-a:sweep", "team-b:sweep", false},
		{"team-a:sweep", "swee", false},
		{"default/j", "j", false},
		{"default/j", "default/j", true},
	} {
		if got := AppIs(c.scoped, c.name); got != c.want {
			t.Errorf("AppIs(%q, %q) = %v, want %v", c.scoped, c.name, got, c.want)
		}
	}
}
