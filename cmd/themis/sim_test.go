package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
)

// sixtyJobs finds tiresias-60job.csv in a shared/traces folder above the
// package, or skips.
func sixtyJobs(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for range 5 {
		for _, p := range []string{filepath.Join(dir, "shared", "traces", "tiresias-60job.csv"), filepath.Join(dir, "..", "shared", "traces", "tiresias-60job.csv")} {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		dir = filepath.Dir(dir)
	}
	t.Skip("tiresias-60job.csv not found")
	return ""
}

// TestSimKnobs runs themis sim end to end with knobs: a policy's own knob,
// a knob of one policy of a comparison, a sweep; misspelt knobs (set or
// swept) are errors naming them.
func TestSimKnobs(t *testing.T) {
	tr := sixtyJobs(t)
	gittins := filepath.Join(filepath.Dir(tr), "yarn-gput1000.csv")
	for _, tc := range []struct {
		name string
		args []string
		err  string // "" for success
		want string // a file the run writes
	}{
		{"own knob", []string{"--policy", "tiresias-gittins", "--set", "tiresias.gittins_dist=" + gittins}, "", "summary.json"},
		{"one policy's knob in a comparison", []string{"--policy", "fifo,tiresias-las", "--set", "tiresias.queues=1000s"}, "", "comparison.md"},
		{"sweep", []string{"--policy", "tiresias-las", "--sweep", "tiresias.promote_knob=1,inf"}, "", "tiresias-las[tiresias.promote_knob=inf]/summary.json"},
		{"misspelt knob", []string{"--policy", "fifo", "--set", "tiresias.qeueus=1"}, "tiresias.qeueus", ""},
		{"misspelt swept knob", []string{"--policy", "tiresias-las", "--sweep", "tiresias.promote_knb=1,2"}, "tiresias.promote_knb", ""},
		{"bad sweep", []string{"--policy", "fifo", "--sweep", "nothing"}, "KNOB=V1,V2", ""},
		{"trace and workload", []string{"--policy", "fifo", "--workload", "fitgpp"}, "one of --trace and --workload", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			o := simOptions{trace: tr, cluster: "n2g4", out: out, seed: 1, quiet: true, vcMode: "hived"}
			fs := simFlags(&o)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.trace, o.out, o.quiet = tr, out, true
			err := (&simCommand{ui: cli.NewMockUi()}).run(o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(out, tc.want)); err != nil {
				t.Errorf("%s not written: %v", tc.want, err)
			}
		})
	}
}
