package sim

import (
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

// peerCase is one trace of testdata/peer with the peer's JCTs for it.
type peerCase struct {
	name       string
	gpn, nodes int
	jobs       []trace.Job
	// want[schedule/scheme][job id] is the peer's JCT in seconds.
	want map[string]map[string]float64
}

// readCSV reads a CSV file, gzipped when its name ends in .gz, without
// its header.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = z
	}
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows[1:]
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// loadPeerCases reads testdata/peer/<prefix>traces.csv<ext> and the
// expected files named (expected.csv<ext>, expected-yarn.csv<ext>), written
// by peerdiff.py from the Tiresias simulator's runs.
func loadPeerCases(t *testing.T, prefix, ext string, expected ...string) []*peerCase {
	var cases []*peerCase
	byName := map[string]*peerCase{}
	for _, r := range readCSV(t, filepath.Join("testdata", "peer", prefix+"traces.csv"+ext)) {
		c := byName[r[0]]
		if c == nil {
			c = &peerCase{name: r[0], gpn: atoi(t, r[1]), nodes: atoi(t, r[2]), want: map[string]map[string]float64{}}
			byName[r[0]] = c
			cases = append(cases, c)
		}
		c.jobs = append(c.jobs, trace.Job{Line: len(c.jobs) + 2, ID: r[3], GPUs: atoi(t, r[4]), Submit: float64(atoi(t, r[5])),
			Duration: float64(atoi(t, r[6])), VC: trace.VCDefault, Model: "resnet50"})
	}
	for _, e := range expected {
		for _, r := range readCSV(t, filepath.Join("testdata", "peer", prefix+e+ext)) {
			c := byName[r[0]]
			run := r[1] + "/" + r[2]
			if c.want[run] == nil {
				c.want[run] = map[string]float64{}
			}
			c.want[run][r[3]] = float64(atoi(t, r[4]))
		}
	}
	return cases
}

// runPeer simulates c under sim.semantics=tiresias and the peer's
// discipline schedule, and returns each finished job's JCT.
func runPeer(t *testing.T, c *peerCase, schedule, scheme, dist string) map[string]float64 {
	t.Helper()
	k, err := core.ParseKnobs([]string{"sim.semantics=tiresias", "sim.scheme=" + scheme, "tiresias.gittins_dist=" + dist})
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Build(schedule, stack.Options{Knobs: k})
	if err != nil {
		t.Fatal(err)
	}
	pol := st.Policy
	ckpt, restore, err := Costs(k)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.FromPresetOrFile(fmt.Sprintf("r1n%dg%d", c.nodes, c.gpn))
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace.Trace{Name: c.name, Format: trace.FormatTiresias, Jobs: c.jobs}
	res, err := Run(Config{Trace: tr, Cluster: cl, Policy: pol, CheckpointCost: ckpt, RestoreCost: restore, Peer: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, j := range res.Jobs {
		if j.Finished {
			got[j.ID] = j.End - j.Submit
		}
	}
	return got
}

// peerBugs are the runs of testdata/peer where the peer departs from its
// own rules, each explained (docs/tiresias.md, "Where the peer is wrong"):
// there our JCTs must differ from the peer's, so that the list stays true.
var peerBugs = map[string]string{
	// At 6151 the next arrival (job 30, at 7144) and job 9's end fall on
	// one second, after a demotion check (7019): dlas_sim_jobs attaches
	// the end to the arrival's event, takes the demotion check first,
	// preempts job 9 there, and still ends it at 7144 with 125 s left.
	"r144 dlas-gpu/count": "stale end on an arrival event",
	"r144 dlas-gpu/yarn":  "stale end on an arrival event",
}

// peerLeaks are the disciplines whose every yarn run the peer gets wrong:
// each pass of shortest_first_sim_jobs empties the cluster with
// empty_infra, whose node.init_node resets GPUs and CPUs but not memory,
// and places every runnable job again, taking its memory again; the nodes
// run out of memory after a few passes, jobs are placed where memory is
// left rather than by the yarn rule, and the peer stops ("This cluster is
// not large enough", printed only with --print) with most jobs unfinished.
// Those runs are compared job by job but not required to match.
var peerLeaks = map[string]bool{"shortest/yarn": true, "shortest-gpu/yarn": true}

// comparePeer checks every job's JCT against the peer's and returns the
// number of runs compared and of runs that matched exactly.
func comparePeer(t *testing.T, cases []*peerCase) (runs, same int) {
	leakRuns, leakJobs, leakSame := 0, 0, 0
	defer func() {
		if leakRuns > 0 {
			t.Logf("peerLeaks: %d runs; of the %d jobs the peer finished in them, %d have our JCT", leakRuns, leakJobs, leakSame)
		}
	}()
	dist := sharedPath(t, "yarn-gput1000.csv")
	for _, c := range cases {
		for run, want := range c.want {
			schedule, scheme, _ := cutLast(run)
			got := runPeer(t, c, schedule, scheme, dist)
			runs++
			if peerLeaks[run] {
				leakRuns++
				for id, w := range want {
					leakJobs++
					if g, ok := got[id]; ok && math.Abs(g-w) <= 1e-6 {
						leakSame++
					}
				}
				continue
			}
			if why, ok := peerBugs[c.name+" "+run]; ok {
				if reflect.DeepEqual(got, want) {
					t.Errorf("%s %s: listed as a peer bug (%s), yet every JCT is the peer's", c.name, run, why)
				}
				continue
			}
			if len(got) != len(want) {
				t.Errorf("%s %s: %d jobs finished, the peer's %d", c.name, run, len(got), len(want))
			}
			bad := 0
			for id, w := range want {
				if g, ok := got[id]; !ok || math.Abs(g-w) > 1e-6 {
					if bad < 3 {
						t.Errorf("%s %s: job %s: JCT %v s, the peer's %v s", c.name, run, id, g, w)
					}
					bad++
				}
			}
			if bad > 3 {
				t.Errorf("%s %s: %d jobs differ in all", c.name, run, bad)
			}
			if bad == 0 && len(got) == len(want) {
				same++
			}
		}
	}
	return runs, same
}

func cutLast(run string) (schedule, scheme string, ok bool) {
	for i := len(run) - 1; i >= 0; i-- {
		if run[i] == '/' {
			return run[:i], run[i+1:], true
		}
	}
	return run, "", false
}

// TestPeerDifferential: under sim.semantics=tiresias every job's JCT is the
// Tiresias simulator's, on random traces (testdata/peer, from peerdiff.py)
// for fifo, dlas-gpu, dlas-gpu-gittins, shortest and shortest-gpu, under
// the count and the yarn schemes.
func TestPeerDifferential(t *testing.T) {
	cases := loadPeerCases(t, "", ".gz", "expected.csv", "expected-yarn.csv")
	if testing.Short() {
		cases = cases[:min(len(cases), 20)]
	}
	runs, same := comparePeer(t, cases)
	t.Logf("%d traces, %d runs compared, %d identical to the peer's per job (the rest are peerBugs and peerLeaks)", len(cases), runs, same)
}

// TestPeerSixtyJobs: the same on the peer's own 60_job.csv, on 2 and 4
// nodes of 4 GPUs.
func TestPeerSixtyJobs(t *testing.T) {
	runs, same := comparePeer(t, loadPeerCases(t, "sixty-", "", "expected.csv", "expected-yarn.csv"))
	t.Logf("%d runs compared, %d identical", runs, same)
}
