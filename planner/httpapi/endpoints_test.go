package httpapi

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/themis-nomad/themis/planner"
)

// Every endpoint's JSON shape, on a view with a lease in force, one being
// revoked, an unhealthy GPU, a draining node, a queue and a rejected job;
// and on one with virtual clusters.
func TestEndpointShapes(t *testing.T) {
	type want struct {
		at    []any
		value any
	}
	cases := []struct {
		name, path string
		view       func() planner.View
		code       int
		want       []want
	}{
		{"nodes", "/v1/nodes", fixture, 200, []want{
			{[]any{"policy"}, "fitgpp"},
			{[]any{"nodes", 0, "name"}, "dev-node"},
			{[]any{"nodes", 0, "rack"}, "rack0"},
			{[]any{"nodes", 0, "gpus_total"}, 4.0},
			{[]any{"nodes", 0, "gpus_leased"}, 2.0},
			{[]any{"nodes", 0, "gpus_revoking"}, 1.0},
			{[]any{"nodes", 0, "gpus_unhealthy"}, 1.0},
			{[]any{"nodes", 0, "gpus_free"}, 0.0},
			{[]any{"nodes", 0, "gpus", 0, "state"}, "leased"},
			{[]any{"nodes", 0, "gpus", 0, "job"}, "default/a"},
			{[]any{"nodes", 0, "gpus", 0, "lease_id"}, "L-a"},
			{[]any{"nodes", 0, "gpus", 0, "path", 1}, "pair0"},
			{[]any{"nodes", 0, "gpus", 2, "state"}, "revoking"},
			{[]any{"nodes", 0, "gpus", 2, "job"}, "default/b"},
			{[]any{"nodes", 0, "gpus", 2, "deadline"}, "2026-11-24T10:00:30Z"},
			{[]any{"nodes", 0, "gpus", 3, "state"}, "unhealthy"},
			{[]any{"nodes", 0, "gpus", 3, "healthy"}, false},
			{[]any{"nodes", 1, "schedulable"}, false},
			{[]any{"nodes", 1, "gpus_free"}, 2.0},
			{[]any{"nodes", 1, "gpus", 0, "state"}, "free"},
			{[]any{"vcs"}, nil},
		}},
		{"nodes with VCs", "/v1/nodes", vcFixture, 200, []want{
			{[]any{"placement"}, "hived"},
			{[]any{"nodes", 0, "gpus", 0, "vc"}, "vision"},
			{[]any{"nodes", 0, "gpus", 0, "cell"}, "vision/socket2.0/gpu.0"},
			{[]any{"nodes", 0, "gpus", 1, "state"}, "free"},
			{[]any{"nodes", 0, "gpus", 1, "cell"}, "vision/socket2.0/gpu.1"},
			{[]any{"vcs", 0, "name"}, "vision"},
			{[]any{"vcs", 0, "cells", "socket2"}, 1.0},
			{[]any{"vcs", 0, "gpus"}, 2.0},
			{[]any{"vcs", 0, "used"}, 1.0},
			{[]any{"vcs", 0, "free"}, 1.0},
			{[]any{"vcs", 0, "virtual_cells", 0, "bound"}, "n1/socket0"},
			{[]any{"vcs", 0, "virtual_cells", 1, "jobs", 0}, "default/v"},
			{[]any{"vcs", 0, "virtual_cells", 1, "state"}, "used"},
			{[]any{"vcs", 0, "virtual_cells", 2, "state"}, "reserved"},
			{[]any{"vcs", 0, "virtual_cells", 2, "jobs"}, nil},
		}},
		{"nodes of a gang", "/v1/nodes", gangFixture, 200, []want{
			{[]any{"nodes", 0, "gpus", 0, "job"}, "default/g"},
			{[]any{"nodes", 1, "gpus", 0, "job"}, "default/g"},
			{[]any{"nodes", 1, "gpus", 0, "lease_id"}, "L-g"},
		}},
		{"leases of a gang", "/v1/leases", gangFixture, 200, []want{
			{[]any{"leases", 0, "parts", 1, "node_name"}, "node-2"},
			{[]any{"leases", 0, "parts", 1, "gpus", 0}, "b0"},
		}},
		{"queue", "/v1/queue", fixture, 200, []want{
			{[]any{"policy"}, "fitgpp"},
			{[]any{"vcs", 0, "vc"}, ""},
			{[]any{"vcs", 0, "jobs", 0, "position"}, 1.0},
			{[]any{"vcs", 0, "jobs", 0, "job"}, "default/c"},
			{[]any{"vcs", 0, "jobs", 0, "namespace"}, "default"},
			{[]any{"vcs", 0, "jobs", 0, "job_id"}, "c"},
			{[]any{"vcs", 0, "jobs", 0, "gpus"}, 1.0},
			{[]any{"vcs", 0, "jobs", 0, "state"}, "waiting"},
			{[]any{"vcs", 0, "jobs", 0, "reason"}, "granted 1 GPUs on dev-node; waiting for default/b to stop"},
			{[]any{"vcs", 0, "jobs", 1, "position"}, 2.0},
			{[]any{"vcs", 0, "jobs", 1, "state"}, "suspended"},
		}},
		{"queue of one VC", "/v1/queue?vc=vision", vcFixture, 200, []want{
			{[]any{"vcs", 0, "vc"}, "vision"},
			{[]any{"vcs", 0, "jobs", 0, "job"}, "default/w"},
		}},
		{"queue of an unknown VC", "/v1/queue?vc=nope", vcFixture, 200, []want{
			{[]any{"vcs"}, []any{}},
		}},
		{"leases", "/v1/leases", fixture, 200, []want{
			{[]any{"leases", 0, "job"}, "default/a"},
			{[]any{"leases", 0, "state"}, "granted"},
			{[]any{"leases", 0, "lease_id"}, "L-a"},
			{[]any{"leases", 0, "node_name"}, "dev-node"},
			{[]any{"leases", 0, "gpus", 1}, "gpu-1"},
			{[]any{"leases", 0, "granted_at"}, "2026-11-24T09:59:00Z"},
			{[]any{"leases", 0, "revoke"}, nil},
			{[]any{"leases", 1, "state"}, "revoking"},
			{[]any{"leases", 1, "revoke", "reason"}, "preempted by fitgpp for default/c"},
			{[]any{"leases", 1, "revoke", "deadline"}, "2026-11-24T10:00:30Z"},
		}},
		{"leases with cells", "/v1/leases", vcFixture, 200, []want{
			{[]any{"leases", 0, "vc"}, "vision"},
			{[]any{"leases", 0, "cells", 0}, "vision/socket2.0/gpu.0"},
		}},
		{"apps", "/v1/apps", themisFixture, 200, []want{
			{[]any{"policy"}, "themis"},
			{[]any{"round"}, 4.0},
			{[]any{"at"}, "2026-11-24T10:00:00Z"},
			{[]any{"offer_gpus"}, 6.0},
			{[]any{"apps", 0, "app"}, "a"},
			{[]any{"apps", 0, "rho"}, 3.5},
			{[]any{"apps", 0, "bid"}, true},
			{[]any{"apps", 0, "won"}, 2.0},
			{[]any{"apps", 0, "rho_after"}, 1.25},
			{[]any{"apps", 0, "placed"}, "machine"},
			{[]any{"apps", 0, "c"}, 1.0},
			{[]any{"apps", 0, "lease_s"}, 30.0},
			{[]any{"apps", 0, "lease_ends"}, "2026-11-24T10:00:30Z"},
			{[]any{"apps", 1, "app"}, "c"},
			{[]any{"apps", 1, "won"}, 0.0},
			{[]any{"apps", 1, "rho_after"}, nil},
			{[]any{"apps", 1, "lease_ends"}, nil},
			{[]any{"apps", 2, "bid"}, false},
		}},
		{"apps without an auction", "/v1/apps", fixture, 200, []want{
			{[]any{"policy"}, "fitgpp"},
			{[]any{"round"}, 0.0},
			{[]any{"at"}, nil},
			{[]any{"apps"}, []any{}},
		}},
		{"decisions", "/v1/decisions", fixture, 200, []want{
			{[]any{"decisions", 0, "seq"}, 1.0},
			{[]any{"decisions", 0, "kind"}, "preempt"},
			{[]any{"decisions", 0, "job"}, "default/b"},
			{[]any{"decisions", 0, "time"}, "2026-11-24T10:00:00Z"},
			{[]any{"decisions", 0, "node"}, "dev-node"},
			{[]any{"decisions", 0, "gpus", 0}, "gpu-2"},
			{[]any{"decisions", 0, "lease_id"}, "L-b"},
			{[]any{"decisions", 0, "reason"}, "preempted by fitgpp for default/c"},
		}},
		{"decisions of a kind", "/v1/decisions?kind=grant", fixture, 200, []want{
			{[]any{"decisions"}, []any{}},
		}},
		{"decisions, bad limit", "/v1/decisions?limit=x", fixture, 400, []want{
			{[]any{"error"}, `limit: want a whole number, got "x"`},
		}},
		{"jobs", "/v1/jobs", fixture, 200, []want{
			{[]any{"jobs", 0, "job"}, "default/a"},
			{[]any{"jobs", 0, "state"}, "granted"},
			{[]any{"jobs", 4, "job"}, "default/bad"},
			{[]any{"jobs", 4, "state"}, "rejected"},
			{[]any{"jobs", 4, "request"}, nil},
		}},
		{"job granted", "/v1/jobs/default/a", fixture, 200, []want{
			{[]any{"state"}, "granted"},
			{[]any{"since"}, "2026-11-24T09:59:00Z"},
			{[]any{"request", "gpus"}, 2.0},
			{[]any{"request", "class"}, "be"},
			{[]any{"lease", "lease_id"}, "L-a"},
			{[]any{"queue"}, nil},
			{[]any{"record", "first_start"}, "2026-11-24T09:59:00Z"},
			{[]any{"decisions"}, nil},
		}},
		{"job revoking", "/v1/jobs/default/b", fixture, 200, []want{
			{[]any{"state"}, "revoking"},
			{[]any{"deadline"}, "2026-11-24T10:00:30Z"},
			{[]any{"lease", "state"}, "revoking"},
			{[]any{"decisions", 0, "kind"}, "preempt"},
		}},
		{"job suspended", "/v1/jobs/default/d", fixture, 200, []want{
			{[]any{"state"}, "suspended"},
			{[]any{"queue", "position"}, 2.0},
			{[]any{"record", "preemptions"}, 1.0},
			{[]any{"record", "attained_gpu_s"}, 240.0},
			{[]any{"lease"}, nil},
		}},
		{"job rejected", "/v1/jobs/default/bad", fixture, 200, []want{
			{[]any{"state"}, "rejected"},
			{[]any{"reason"}, "themis.gpus: must be a whole number"},
		}},
		{"job unknown", "/v1/jobs/default/nope", fixture, 404, []want{
			{[]any{"error"}, "no themis job default/nope"},
		}},
		{"job path malformed", "/v1/jobs/default", fixture, 400, []want{
			{[]any{"error"}, "want /v1/jobs/<namespace>/<job id>"},
		}},
		{"planner", "/v1/planner", fixture, 200, []want{
			{[]any{"id"}, "p1"},
			{[]any{"version"}, "themis-nomad v0.1.0 (3f2a9c1e7b4d, go1.24.4)"},
			{[]any{"leading"}, true},
			{[]any{"leader", "api"}, "http://p1:4680"},
			{[]any{"round", "time"}, "2026-11-24T10:00:00Z"},
			{[]any{"round", "duration_ms"}, 20.0},
		}},
		{"no such endpoint", "/v2/nodes", fixture, 404, []want{
			{[]any{"error"}, "no such endpoint: /v2/nodes (see docs/api.md)"},
		}},
		{"bad index", "/v1/nodes?index=x", fixture, 400, []want{
			{[]any{"error"}, `index: want a whole number, got "x"`},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := leader(t, tc.view())
			code, h, body := get(t, ts, tc.path)
			if code != tc.code {
				t.Fatalf("GET %s: %d, want %d: %v", tc.path, code, tc.code, body)
			}
			if code == http.StatusOK && h.Get(IndexHeader) == "" {
				t.Errorf("GET %s: no %s header", tc.path, IndexHeader)
			}
			for _, w := range tc.want {
				if got := at(t, body, w.at...); fmt.Sprint(got) != fmt.Sprint(w.value) {
					t.Errorf("GET %s: %v = %#v, want %#v", tc.path, w.at, got, w.value)
				}
			}
		})
	}
}

// The decision log keeps the newest decisions, oldest first, numbered.
func TestDecisionRing(t *testing.T) {
	s := New(Options{Decisions: 3})
	s.SetLeading(true)
	for i := range 5 {
		v := fixture()
		v.Events[0].Reason = fmt.Sprint("r", i)
		s.Publish(v)
	}
	got := s.snapshot().decisions
	if len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 || got[2].Reason != "r4" {
		t.Fatalf("ring %+v: want seq 3..5", got)
	}
	ts := httptestServer(t, s)
	_, _, body := get(t, ts, "/v1/decisions?limit=1")
	if n := len(at(t, body, "decisions").([]any)); n != 1 || at(t, body, "decisions", 0, "seq") != 5.0 {
		t.Errorf("limit=1: %v", body)
	}
}
