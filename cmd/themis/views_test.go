package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
)

var v0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// scriptedView is a planner's round on two 4-GPU nodes in two virtual
// clusters: run holds 2 GPUs of vision on n1 (a lease for a time, ending
// at v0+5m), victim 1 GPU of vision being preempted for wait; wait (4
// GPUs) and later (1 GPU) queue in vision, sus (2 GPUs, preempted once)
// in speech; crash failed.
func scriptedView() planner.View {
	k := func(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }
	gpus := func(node string, n int) []core.GPU {
		var out []core.GPU
		for i := range n {
			out = append(out, core.GPU{ID: node + "-g" + string(rune('0'+i)), Index: i, Path: []string{"socket0", "pair" + string(rune('0'+i/2))}, Healthy: true})
		}
		return out
	}
	revoke := &lease.Revoke{Reason: "preempted by fitgpp for default/wait", Since: v0, Deadline: v0.Add(30 * time.Second)}
	return planner.View{
		Time: v0, Decided: true, Policy: "fitgpp", Placement: "hived",
		Nodes: []core.Node{{ID: "n1", Name: "node-1", Rack: "rack0", Schedulable: true, GPUs: gpus("n1", 4)},
			{ID: "n2", Name: "node-2", Rack: "rack0", Schedulable: true, GPUs: gpus("n2", 4)}},
		Leases: []lease.JobLease{
			{LeaseID: "L-run", Namespace: "default", JobID: "run", NodeID: "n1", NodeName: "node-1", GPUs: []string{"n1-g0", "n1-g1"}, VC: "vision",
				GrantedAt: v0.Add(-time.Hour), Ends: v0.Add(5 * time.Minute), Cells: []string{"vision/socket4.0/gpu.0", "vision/socket4.0/gpu.1"}},
			{LeaseID: "L-victim", Namespace: "default", JobID: "victim", NodeID: "n1", NodeName: "node-1", GPUs: []string{"n1-g2"}, VC: "vision",
				GrantedAt: v0.Add(-time.Hour), Revoke: revoke},
		},
		Jobs: []planner.JobView{
			{Key: k("run"), Valid: true, GPUs: 2, VC: "vision", Class: "be", Status: lease.JobStatus{State: "granted", Node: "node-1", LeaseID: "L-run", Since: v0}},
			{Key: k("victim"), Valid: true, GPUs: 1, VC: "vision", Class: "be", Status: lease.JobStatus{State: "revoking", Reason: revoke.Reason, Deadline: revoke.Deadline, Since: v0}},
			{Key: k("wait"), Valid: true, GPUs: 4, VC: "vision", Class: "te", Status: lease.JobStatus{State: "queued", Reason: "granted 4 GPUs; waiting for default/victim to stop", Since: v0}},
			{Key: k("later"), Valid: true, GPUs: 1, VC: "vision", Class: "be", Status: lease.JobStatus{State: "queued", Reason: "behind default/wait", Since: v0}},
			{Key: k("sus"), Valid: true, GPUs: 2, VC: "speech", Class: "be", Status: lease.JobStatus{State: "suspended", Reason: "waiting for 2 free GPUs in speech's cells (0 free)", Since: v0, Preemptions: 1},
				Record: lease.JobRecord{Preemptions: 1, Executed: 60, Attained: 120}},
			{Key: k("crash"), Valid: true, GPUs: 1, VC: "vision", Status: lease.JobStatus{State: "failed", Reason: `task "t": Driver Failure: permission denied`, Since: v0}},
		},
		Queue: []planner.Queued{
			{Job: k("wait"), VC: "vision", Position: 1, GPUs: 4, State: "queued", Reason: "granted 4 GPUs; waiting for default/victim to stop"},
			{Job: k("later"), VC: "vision", Position: 2, GPUs: 1, State: "queued", Reason: "behind default/wait"},
			{Job: k("sus"), VC: "speech", Position: 1, GPUs: 2, State: "suspended", Reason: "waiting for 2 free GPUs in speech's cells (0 free)"},
		},
		VCs: []planner.VCView{
			{VCView: hived.VCView{Name: "vision", Cells: map[string]int{"socket4": 1}, GPUs: 4, Used: 3, Free: 1},
				Cells: []hived.CellView{{Name: "vision/socket4.0", Type: "socket4", Level: "socket", GPUs: 4, State: hived.StateUsed, Used: 3, VC: "vision", Bound: "n1", Node: "n1",
					Jobs: []core.JobKey{k("run"), k("victim")}}}},
			{VCView: hived.VCView{Name: "speech", Cells: map[string]int{"socket4": 1}, GPUs: 4, Used: 0, Free: 4},
				Cells: []hived.CellView{{Name: "speech/socket4.0", Type: "socket4", Level: "socket", GPUs: 4, State: hived.StateFree, VC: "speech"}}},
		},
		GPUCells: map[string]hived.CellView{"n1-g0": {VC: "vision", Bound: "vision/socket4.0/gpu.0"}},
		Events: []planner.Event{{Time: v0, Kind: planner.EventPreempt, Job: k("victim"), Node: "node-1", GPUs: []string{"n1-g2"}, LeaseID: "L-victim", Reason: revoke.Reason},
			{Time: v0.Add(-time.Minute), Kind: planner.EventPreempt, Job: k("sus"), Node: "node-2", Reason: "preempted by fitgpp for default/wait"}},
		Auction: &arbiter.RoundReport{At: v0, Round: 3, Offer: 4, Apps: []arbiter.AppReport{{App: "run", Rho: 1.5, RhoAfter: 0.9, Bid: true, Won: 2, Placed: "machine", C: 1, Lease: 300}}},
	}
}

// scriptedAPI serves scriptedView as a leading planner.
func scriptedAPI(t *testing.T) string {
	t.Helper()
	s := httpapi.New(httpapi.Options{ID: "p1"})
	s.SetLeading(true)
	s.Publish(scriptedView())
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// runView runs a command on args and returns its exit code, stdout and
// stderr.
func runView(newCmd func(viewCommand) cli.Command, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	ui := &cli.BasicUi{Writer: &out, ErrorWriter: &errOut}
	code := newCmd(viewCommand{ui: ui, out: &out}).Run(args)
	return code, out.String(), errOut.String()
}

var (
	queueView  = func(v viewCommand) cli.Command { return &queueCommand{v} }
	nodesView  = func(v viewCommand) cli.Command { return &nodesCommand{v} }
	leasesView = func(v viewCommand) cli.Command { return &leasesCommand{v} }
	appsView   = func(v viewCommand) cli.Command { return &appsCommand{v} }
	vcsView    = func(v viewCommand) cli.Command { return &vcsCommand{v} }
)

// Each view's -json is the API's document, and its table shows the rows
// an operator looks for.
func TestViewsFromTheAPI(t *testing.T) {
	api := scriptedAPI(t)
	get := func(path string) any {
		resp, err := http.Get(api + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name  string
		cmd   func(viewCommand) cli.Command
		args  []string
		path  string // the API document -json must equal ("": none)
		table []string
	}{
		{"queue", queueView, nil, "/v1/queue", []string{
			"VC      POS  JOB            GPUS  STATE      REASON",
			"vision  1    default/wait   4     waiting    granted 4 GPUs; waiting for default/victim to stop",
			"vision  2    default/later  1     queued     behind default/wait",
			"speech  1    default/sus    2     suspended  waiting for 2 free GPUs in speech's cells (0 free)"}},
		{"queue -vc", queueView, []string{"-vc", "speech"}, "/v1/queue?vc=speech", []string{"speech  1    default/sus  2     suspended"}},
		{"nodes", nodesView, nil, "/v1/nodes", []string{
			"NODE    RACK   SCHEDULABLE  GPUS  FREE  LEASED  REVOKING  UNHEALTHY",
			"node-1  rack0  yes          4     1     2       1         0",
			"node-2  rack0  yes          4     4     0       0         0",
			"node-1  0    n1-g0  vision/socket4.0/gpu.0  leased    healthy  default/run     vision  L-run",
			"node-1  2    n1-g2  socket0/pair1         revoking  healthy  default/victim  vision  L-victim  " + clock(v0.Add(30*time.Second)),
			"node-2  3    n2-g3  socket0/pair1         free      healthy  -               -       -         -"}},
		{"leases", leasesView, nil, "/v1/leases", []string{
			"JOB             STATE     NODE    GPUS  VC      GRANTED",
			"default/run     granted   node-1  2     vision  " + clock(v0.Add(-time.Hour)) + "  " + clock(v0.Add(5*time.Minute)) + "  -",
			"default/victim  revoking  node-1  1     vision  " + clock(v0.Add(-time.Hour)) + "  -         " + clock(v0.Add(30*time.Second)) + "  preempted by fitgpp for default/wait"}},
		{"apps", appsView, nil, "/v1/apps", []string{"auction round 3 at " + clock(v0) + ", 4 GPUs offered", "run  1.500  yes  2    0.900        machine  " + clock(v0.Add(5*time.Minute))}},
		{"vcs", vcsView, nil, "", []string{
			"NAME    CELLS      GPUS  USED  FREE  DOOMED",
			"vision  socket4=1  4     3     1     0",
			"speech  socket4=1  4     0     4     0",
			"vision: virtual cells",
			"vision/socket4.0  socket4  socket  4     used   3     0    n1     n1    default/run,default/victim"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runView(tc.cmd, append([]string{"-address", api}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			// Columns compared with their spacing collapsed.
			squeeze := func(s string) string {
				lines := strings.Split(s, "\n")
				for i, l := range lines {
					lines[i] = strings.Join(strings.Fields(l), " ")
				}
				return strings.Join(lines, "\n")
			}
			for _, want := range tc.table {
				if !strings.Contains(squeeze(out), squeeze(want)) {
					t.Errorf("the table lacks\n%s\n---\n%s", want, out)
				}
			}
			code, out, errOut = runView(tc.cmd, append([]string{"-address", api, "-json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("-json: exit %d: %s", code, errOut)
			}
			var got any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("-json: %v\n%s", err, out)
			}
			want := any(nil)
			if tc.path != "" {
				want = get(tc.path)
			} else {
				nodes := get("/v1/nodes").(map[string]any)
				want = map[string]any{"policy": nodes["policy"], "placement": nodes["placement"], "vcs": nodes["vcs"]}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("-json:\n%s\nwant the API's document", out)
			}
		})
	}
}

// -t formats the API's document with a Go template by its JSON field
// names; a bad template, -json with -t, and a view's stray argument are
// refused; themis vcs points at themis vcs init for the writer's flags.
func TestViewTemplatesAndRefusals(t *testing.T) {
	api := scriptedAPI(t)
	code, out, errOut := runView(leasesView, "-address", api, "-t", `{{range .leases}}{{.job}} {{.state}} {{join .gpus "+"}}{{"\n"}}{{end}}`)
	if code != 0 || out != "default/run granted n1-g0+n1-g1\ndefault/victim revoking n1-g2\n" {
		t.Errorf("-t: exit %d, %q, %s", code, out, errOut)
	}
	for _, tc := range []struct {
		cmd  func(viewCommand) cli.Command
		args []string
		code int
		want string
	}{
		{leasesView, []string{"-t", "{{.nope"}, 1, "-t: template"},
		{leasesView, []string{"-json", "-t", "{{.}}"}, 2, "give -json or -t, not both"},
		{queueView, []string{"extra"}, 2, `unexpected argument "extra"`},
		{vcsView, []string{"--trace", "x.csv"}, 2, "-trace is a flag of themis vcs init"},
	} {
		code, _, errOut := runView(tc.cmd, append([]string{"-address", api}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d, %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
