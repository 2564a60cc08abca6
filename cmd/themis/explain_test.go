package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
)

var explainView = func(v viewCommand) cli.Command { return &explainCommand{v} }

// themis job explain on a waiting, a preempted, a running and a failed
// job of the scripted round: the queue and what is ahead, what would let
// it run, the preemption and the lease; an unknown job is an error.
func TestJobExplain(t *testing.T) {
	api := scriptedAPI(t)
	for _, tc := range []struct {
		job   string
		check func(t *testing.T, x explanation)
		table []string
	}{
		{"later", func(t *testing.T, x explanation) {
			if x.State != "queued" || x.VC != "vision" || x.Position != 2 || len(x.Ahead) != 1 || x.Ahead[0].Job != "default/wait" {
				t.Errorf("%+v", x)
			}
		}, []string{"Queue        position 2 in virtual cluster vision's queue", "1. default/wait (4 GPUs, queued)",
			"4 GPUs free on node-2 now: it waits for its turn, not for room (1 job ahead of it, asking for 4 GPUs)",
			`another virtual cluster: speech has 4 GPUs free in its cells (themis.vc = "speech"`,
			"default/victim's 1 GPU on node-1 free up by " + clock(v0.Add(30e9)),
			"default/run's lease of 2 GPUs on node-1 ends at " + clock(v0.Add(300e9))}},
		{"default/wait", func(t *testing.T, x explanation) {
			if x.Position != 1 || len(x.Ahead) != 0 || x.Request == nil || x.Request.GPUs != 4 {
				t.Errorf("%+v", x)
			}
		}, []string{"nothing: it is first", "fewer GPUs: virtual cluster vision has 1 GPU free in its cells (3 of 4 in use); asking for 1 (themis.gpus = 1) would fit them",
			"as an opportunistic job (themis.priority = -1, if its namespace may run them) it could use the 4 GPUs free on node-2 now"}},
		{"sus", func(t *testing.T, x explanation) {
			if x.State != "suspended" || x.Preemptions != 1 || len(x.Preempted) != 1 || x.VC != "speech" {
				t.Errorf("%+v", x)
			}
		}, []string{"Preemptions  1", "Preempted at " + clock(v0.Add(-60e9)) + " on node-2: preempted by fitgpp for default/wait"}},
		{"victim", func(t *testing.T, x explanation) {
			if x.State != "revoking" || x.Lease == nil || x.Lease.Revoke == nil || x.Position != 0 {
				t.Errorf("%+v", x)
			}
		}, []string{"Preempted    preempted by fitgpp for default/wait; checkpointing until " + clock(v0.Add(30e9))}},
		{"run", func(t *testing.T, x explanation) {
			if x.State != "granted" || x.Lease == nil || x.Lease.LeaseID != "L-run" || len(x.Options) != 0 {
				t.Errorf("%+v", x)
			}
		}, []string{"Lease        L-run: 2 GPUs on node-1 (n1-g0,n1-g1), granted " + clock(v0.Add(-3600e9)) + ", ends " + clock(v0.Add(300e9))}},
		{"crash", func(t *testing.T, x explanation) {
			if x.State != "failed" || !strings.Contains(x.Reason, "permission denied") {
				t.Errorf("%+v", x)
			}
		}, []string{"State        failed", `Why          task "t": Driver Failure: permission denied`}},
	} {
		t.Run(tc.job, func(t *testing.T) {
			code, out, errOut := runView(explainView, "-address", api, "-json", tc.job)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var x explanation
			if err := json.Unmarshal([]byte(out), &x); err != nil {
				t.Fatal(err)
			}
			tc.check(t, x)
			_, out, _ = runView(explainView, "-address", api, tc.job)
			for _, want := range tc.table {
				if !strings.Contains(out, want) {
					t.Errorf("lacks %q:\n%s", want, out)
				}
			}
		})
	}
	code, _, errOut := runView(explainView, "-address", api, "nope")
	if code != 1 || !strings.Contains(errOut, "no themis job default/nope") {
		t.Errorf("an unknown job: exit %d, %s", code, errOut)
	}
	code, _, errOut = runView(explainView, "-address", api)
	if code != 2 || !strings.Contains(errOut, "give one job") {
		t.Errorf("no job: exit %d, %s", code, errOut)
	}
}
