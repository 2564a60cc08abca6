package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A standby answers every view endpoint with 503 and who leads (with its
// API in X-Themis-Leader), and /v1/planner with 200; the metrics still
// answer.
func TestStandby(t *testing.T) {
	cases := []struct {
		name       string
		leader     func(context.Context) (Leader, error)
		wantLeader string // X-Themis-Leader
		wantError  string
	}{
		{"leader known", func(context.Context) (Leader, error) { return Leader{ID: "p2", API: "http://p2:4680"}, nil },
			"http://p2:4680", "this planner is a standby: only the leading planner serves the API; p2 leads at http://p2:4680"},
		{"leader without API", func(context.Context) (Leader, error) { return Leader{ID: "p2"}, nil },
			"", "this planner is a standby: only the leading planner serves the API; p2 leads"},
		{"no leader", func(context.Context) (Leader, error) { return Leader{}, nil },
			"", "this planner is a standby: only the leading planner serves the API (no planner leads now)"},
		{"Consul down", func(context.Context) (Leader, error) { return Leader{}, errors.New("down") },
			"", "this planner is a standby: only the leading planner serves the API (no planner leads now)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{ID: "p1", Leader: tc.leader})
			s.Publish(fixture()) // ignored for the view: not leading
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			for _, path := range []string{"/v1/nodes", "/v1/queue", "/v1/leases", "/v1/decisions", "/v1/jobs", "/v1/jobs/default/a", "/v1/queue?index=1&wait=10s"} {
				code, h, body := get(t, ts, path)
				if code != http.StatusServiceUnavailable {
					t.Fatalf("GET %s: %d, want 503", path, code)
				}
				if h.Get(LeaderHeader) != tc.wantLeader {
					t.Errorf("GET %s: %s %q, want %q", path, LeaderHeader, h.Get(LeaderHeader), tc.wantLeader)
				}
				if got := at(t, body, "error"); got != tc.wantError {
					t.Errorf("GET %s: error %q, want %q", path, got, tc.wantError)
				}
			}
			code, _, body := get(t, ts, "/v1/planner")
			if code != 200 || at(t, body, "leading") != false || at(t, body, "id") != "p1" {
				t.Errorf("/v1/planner: %d %v", code, body)
			}
			if code, _, _ := get(t, ts, "/metrics"); code != 200 {
				t.Errorf("/metrics: %d", code)
			}
		})
	}
}

// Taking leadership drops the previous term's view.
func TestLeadershipStartsEmpty(t *testing.T) {
	s, ts := leader(t, fixture())
	s.SetLeading(false)
	s.SetLeading(true)
	_, _, body := get(t, ts, "/v1/leases")
	if n := len(at(t, body, "leases").([]any)); n != 0 {
		t.Errorf("%d leases from the last term, want none before the first round", n)
	}
}
