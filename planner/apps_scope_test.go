package planner

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/themis-nomad/themis/planner/arbiter"
)

// An app belongs to its namespace: a tenant whose job names another
// team's app ("sweep") does not join that app's auction bid or its
// app-level ranking; the auction (and every view of it) names each app
// with its namespace.
func TestAppsAreScopedToTheirNamespace(t *testing.T) {
	h := newClusterHarness(t, 2, 8, themisStack(t, "60s"))
	h.Nomad.SubmitApp("a-1", 2, "sweep")
	h.Nomad.SubmitApp("a-2", 2, "sweep")
	h.Nomad.SubmitApp("intruder", 2, "sweep")
	h.Nomad.Move("intruder", "team-b")
	h.Round("auction")
	var rep arbiter.RoundReport
	if err := json.Unmarshal(h.Store.Auction, &rep); err != nil {
		t.Fatalf("auction report: %v (%q)", err, h.Store.Auction)
	}
	var apps []string
	for _, a := range rep.Apps {
		apps = append(apps, a.App)
	}
	slices.Sort(apps)
	if want := []string{"default:sweep", "team-b:sweep"}; !slices.Equal(apps, want) {
		t.Fatalf("the auction's apps are %q, want %q (team-b's job is not default's app)", apps, want)
	}
}
