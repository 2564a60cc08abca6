package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/httpapi"
)

// themis sim --from-live on a live queue of 20 jobs (the suite's FIFO
// planner, 8 GPUs): the running jobs' work left comes from their progress
// reports; the replay under FIFO and under Tiresias-LAS predicts every
// job's wait, side by side, as a table and as JSON.
func TestSimFromLive(t *testing.T) {
	const n = 20
	var ids []string
	for i := range n {
		id := fmt.Sprintf("e2e-whatif-%02d", i)
		ids = append(ids, id)
		trainJob{gpus: []int{2, 1, 4, 1}[i%4], steps: 3000}.run(t, id)
	}
	c := &httpapi.Client{Addr: env.apiURL}
	// Wait until the running jobs report progress with a rate.
	eventually(t, 90*time.Second, "the running jobs' progress", func() (bool, error) {
		var jobs httpapi.JobsResponse
		if _, err := c.Get(env.ctx, "/v1/jobs", 0, 0, &jobs); err != nil {
			return false, err
		}
		waiting, running := 0, 0
		for _, j := range jobs.Jobs {
			if !strings.HasPrefix(j.JobID, "e2e-whatif-") {
				continue
			}
			switch j.State {
			case "queued":
				waiting++
			case "granted":
				if j.Progress == nil || j.Progress.Rate <= 0 {
					return false, fmt.Errorf("%s runs without a progress rate yet", j.Job)
				}
				running++
			}
		}
		return waiting+running == n && waiting > 0 && running > 0, fmt.Errorf("%d waiting, %d running", waiting, running)
	})
	start := time.Now()
	code, out, errOut := themisCLI(t, 2*time.Minute, "sim", "--from-live", env.apiURL, "--policy", "tiresias-las", "--json")
	if code != 0 {
		t.Fatalf("themis sim --from-live: exit %d\n%s", code, errOut)
	}
	t.Logf("themis sim --from-live --json took %s", time.Since(start).Round(time.Millisecond))
	var w struct {
		Current, Proposed struct {
			Policy string `json:"policy"`
		}
		Jobs []struct {
			Job             string  `json:"job"`
			State           string  `json:"state"`
			RemainingS      float64 `json:"remaining_s"`
			RemainingAssume bool    `json:"remaining_assumed"`
			Current         struct {
				WaitS float64 `json:"wait_s"`
				EndS  float64 `json:"end_s"`
			} `json:"current"`
			Proposed struct {
				WaitS float64 `json:"wait_s"`
				EndS  float64 `json:"end_s"`
			} `json:"proposed"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if w.Current.Policy != "fifo" || w.Proposed.Policy != "tiresias-las" {
		t.Errorf("policies %q and %q, want fifo and tiresias-las", w.Current.Policy, w.Proposed.Policy)
	}
	ours, waited := 0, 0
	for _, j := range w.Jobs {
		if !strings.HasPrefix(j.Job, "default/e2e-whatif-") {
			continue
		}
		ours++
		if j.Current.EndS <= 0 || j.Proposed.EndS <= 0 || j.Current.WaitS < 0 || j.Proposed.WaitS < 0 {
			t.Errorf("%s: %+v, want a predicted wait and end under both", j.Job, j)
		}
		switch j.State {
		case "granted":
			if j.RemainingAssume || j.RemainingS <= 0 || j.RemainingS > 300 {
				t.Errorf("%s runs: remaining %.0f s (assumed %v), want its progress's (at most 300 s)", j.Job, j.RemainingS, j.RemainingAssume)
			}
		case "queued":
			if j.Current.WaitS > 0 {
				waited++
			}
		}
	}
	if ours != n || waited == 0 {
		t.Errorf("%d of our %d jobs in the what-if, %d predicted to wait:\n%s", ours, n, waited, out)
	}
	code, out, errOut = themisCLI(t, 2*time.Minute, "sim", "--from-live", env.apiURL, "--policy", "tiresias-las")
	if code != 0 || !strings.Contains(out, "WAIT NOW") || !strings.Contains(out, "WAIT PROPOSED") || strings.Count(out, "default/e2e-whatif-") != n {
		t.Errorf("the table: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("themis sim --from-live:\n%s", out)
	for _, id := range ids {
		_, _, _ = env.nomad.Jobs().Deregister(id, true, nil)
	}
}
