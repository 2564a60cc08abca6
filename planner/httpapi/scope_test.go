package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// fakeNomadACL answers what NomadAuth asks Nomad: token "mgmt" is a
// management token, "tb" a client token that may list jobs in team-b
// only (Nomad lists it default too, where its policy has another
// capability), any other is refused; with disabled set, Nomad's ACLs are
// off.
func fakeNomadACL(t *testing.T, disabled bool) *nomadapi.Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("X-Nomad-Token")
		if disabled {
			http.Error(w, "ACL support disabled", http.StatusBadRequest)
			return
		}
		switch {
		case r.URL.Path == "/v1/acl/token/self" && tok == "mgmt":
			_ = json.NewEncoder(w).Encode(nomadapi.ACLToken{AccessorID: "m", Type: "management"})
		case r.URL.Path == "/v1/acl/token/self" && tok == "tb":
			_ = json.NewEncoder(w).Encode(nomadapi.ACLToken{AccessorID: "b", Type: "client", Policies: []string{"team-b"}})
		case r.URL.Path == "/v1/namespaces" && tok == "tb":
			_ = json.NewEncoder(w).Encode([]nomadapi.Namespace{{Name: "default"}, {Name: "team-b"}})
		case r.URL.Path == "/v1/jobs" && tok == "tb" && r.URL.Query().Get("namespace") == "team-b":
			_ = json.NewEncoder(w).Encode([]nomadapi.JobListStub{})
		default:
			http.Error(w, "Permission denied", http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// twoTenants is fixture() with job e of team-b, leased and in a decision.
func twoTenants() planner.View {
	v := fixture()
	e := core.JobKey{Namespace: "team-b", ID: "e"}
	v.Leases = append(v.Leases, lease.JobLease{LeaseID: "L-e", Namespace: "team-b", JobID: "e", NodeID: "n2", NodeName: "spare-node", GPUs: []string{"gpu-4"}, VC: "default", GrantedAt: t0})
	v.Jobs = append(v.Jobs, planner.JobView{Key: e, Valid: true, GPUs: 1, VC: "default", Class: "be",
		Status: lease.JobStatus{Namespace: "team-b", JobID: "e", State: "granted", LeaseID: "L-e", Since: t0}})
	v.Events = append(v.Events, planner.Event{Time: t0, Kind: planner.EventGrant, Job: e, Node: "spare-node", GPUs: []string{"gpu-4"}, LeaseID: "L-e"})
	v.Auction = &core.RoundReport{At: t0, Round: 1, Apps: []core.AppReport{{App: "default:sweep"}, {App: "team-b:sweep"}, {App: "team-b/e"}}}
	return v
}

func fetch(t *testing.T, ts *httptest.Server, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With Nomad ACL tokens resolved (NomadAuth), a caller sees only the
// namespaces its token can read: team-b's token reads team-b's job, lease,
// decision and apps and nothing of default's; no token, or one Nomad
// refuses, reads nothing; /metrics needs a management token; a management
// token, or a Nomad without ACLs, reads everything.
func TestAPIScopedByNomadToken(t *testing.T) {
	serve := func(disabled bool) *httptest.Server {
		s := New(Options{ID: "p1", Auth: &NomadAuth{API: fakeNomadACL(t, disabled)}})
		s.SetLeading(true)
		s.Publish(twoTenants())
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		return ts
	}
	ts := serve(false)
	for _, tok := range []string{"", "forged"} {
		if code, body := fetch(t, ts, "/v1/jobs", tok); code != http.StatusForbidden || strings.Contains(body, `"default/a"`) {
			t.Errorf("token %q: %d %s, want 403 and no job", tok, code, body)
		}
	}
	paths := []string{"/v1/jobs", "/v1/leases", "/v1/decisions", "/v1/apps", "/v1/queue", "/v1/nodes", "/v1/jobs/team-b/e"}
	for _, p := range paths {
		code, body := fetch(t, ts, p, "tb")
		if strings.Contains(body, "default/") || strings.Contains(body, "default:") || strings.Contains(body, "L-a") {
			t.Errorf("team-b reads default's in %s (%d): %.400s", p, code, body)
		}
	}
	for _, p := range []string{"/v1/jobs", "/v1/leases", "/v1/decisions", "/v1/apps"} {
		if code, body := fetch(t, ts, p, "tb"); code != http.StatusOK || !strings.Contains(body, "team-b") {
			t.Errorf("team-b does not read its own in %s: %d %.300s", p, code, body)
		}
	}
	if code, _ := fetch(t, ts, "/v1/jobs/default/a", "tb"); code != http.StatusNotFound {
		t.Errorf("team-b reading default/a: %d, want 404", code)
	}
	if code, _ := fetch(t, ts, "/metrics", "tb"); code != http.StatusForbidden {
		t.Errorf("team-b reading /metrics: %d, want 403", code)
	}
	for _, srv := range []struct {
		ts  *httptest.Server
		tok string
	}{{ts, "mgmt"}, {serve(true), ""}} {
		for _, p := range []string{"/v1/jobs", "/v1/leases"} {
			if code, body := fetch(t, srv.ts, p, srv.tok); code != http.StatusOK || !strings.Contains(body, "default/a") || !strings.Contains(body, "team-b/e") {
				t.Errorf("token %q reading %s: %d %.300s, want every namespace", srv.tok, p, code, body)
			}
		}
		if code, _ := fetch(t, srv.ts, "/metrics", srv.tok); code != http.StatusOK {
			t.Errorf("token %q reading /metrics: %d", srv.tok, code)
		}
	}
}
