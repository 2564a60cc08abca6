package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The what-if of a scripted round (two 4-GPU nodes in two virtual
// clusters): every waiting and running job is replayed under the planner's
// fitgpp with its VCs, and under fifo without VCs and with another VC
// config; the running jobs hold their service, the waiting ones get a
// predicted wait; a job without progress gets the assumed work.
func TestSimFromLiveScripted(t *testing.T) {
	api := scriptedAPI(t)
	run := func(args ...string) (whatIf, string) {
		var o simOptions
		fs := simFlags(&o)
		if err := fs.Parse(append([]string{"--from-live", api}, args...)); err != nil {
			t.Fatal(err)
		}
		o.given = map[string]bool{}
		fs.Visit(func(f *flag.Flag) { o.given[f.Name] = true })
		var out bytes.Buffer
		if err := (&simCommand{}).runFromLive(o, &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var w whatIf
		if o.json {
			if err := json.Unmarshal(out.Bytes(), &w); err != nil {
				t.Fatal(err)
			}
		}
		return w, out.String()
	}
	w, _ := run("--json", "--policy", "fifo", "--assume-remaining", "30m")
	if w.Current.Policy != "fitgpp" || w.Current.VCConfig != "the planner's" || w.Proposed.Policy != "fifo" {
		t.Errorf("settings %+v / %+v", w.Current, w.Proposed)
	}
	if len(w.Jobs) != 5 {
		t.Fatalf("%d jobs, want run, victim, wait, later, sus: %+v", len(w.Jobs), w.Jobs)
	}
	// The running jobs enter the replay first: under fifo they run on
	// (under fitgpp the trial-and-error job wait goes first).
	if w.Jobs[0].Job != "default/run" || w.Jobs[0].State != "granted" || w.Jobs[0].Proposed.WaitS != 0 {
		t.Errorf("first job %+v, want the running one, not waiting under fifo", w.Jobs[0])
	}
	for _, j := range w.Jobs {
		if !j.RemainingAssume || j.RemainingS != 1800 {
			t.Errorf("%s: remaining %v (assumed %v), want the assumed 30m", j.Job, j.RemainingS, j.RemainingAssume)
		}
		if j.Current.EndS <= 0 || j.Proposed.EndS <= 0 {
			t.Errorf("%s does not finish: %+v", j.Job, j)
		}
	}
	_, text := run("--policy", "fifo")
	for _, want := range []string{"current:  fitgpp, virtual clusters: the planner's", "proposed: fifo, virtual clusters: the planner's",
		"JOB             GPUS  VC      STATE      REMAINING  WAIT NOW", "default/later", "* no progress report to go by: assumed 1h0m0s"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	vcs := filepath.Join(t.TempDir(), "vcs.hcl")
	if err := os.WriteFile(vcs, []byte("vc \"vision\" {\n  cells {\n    type  = \"socket4\"\n    count = 1\n  }\n  cells {\n    type  = \"pair2\"\n    count = 1\n  }\n}\nvc \"speech\" {\n  cells {\n    type  = \"pair2\"\n    count = 1\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, _ = run("--json", "--vc-config", vcs)
	if w.Proposed.VCConfig != vcs || w.Proposed.Policy != "fitgpp" {
		t.Errorf("proposed %+v", w.Proposed)
	}
}
