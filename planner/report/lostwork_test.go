package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLostWorkReported: a run with periodic checkpoints reports its lost
// work in summary.json, report.md and the comparison (JSON and a table
// with the per-preemption average and the ratio to the reference); a run
// without them has none of it, so earlier outputs are unchanged.
func TestLostWorkReported(t *testing.T) {
	runs := twoPolicies()
	s := Summarize(runs[0])
	b, _ := json.Marshal(s)
	if s.LostWork != nil || strings.Contains(string(b), "lost_work") {
		t.Errorf("a run without periodic checkpoints reports lost work: %s", b)
	}
	c, err := Compare(runs, "fifo", TiresiasBinning)
	if err != nil {
		t.Fatal(err)
	}
	if md := string(comparisonMarkdown(c)); strings.Contains(md, "Work lost") {
		t.Errorf("comparison without periodic checkpoints has a lost-work table")
	}

	for i := range runs {
		runs[i].CheckpointEvery = 600
	}
	runs[0].LostWork = 0
	runs[1].LostWork = 1000 // 4 preemptions
	s = Summarize(runs[1])
	if s.LostWork == nil || *s.LostWork != 1000 {
		t.Fatalf("summary lost work %v, want 1000", s.LostWork)
	}
	if b, _ := json.Marshal(s); !strings.Contains(string(b), `"lost_work_gpu_s":1000`) {
		t.Errorf("summary.json lacks lost_work_gpu_s: %s", b)
	}
	if md := string(runMarkdown(s)); !strings.Contains(md, "| GPU-seconds of work lost to preemption | 1000 GPU-s |") {
		t.Errorf("report.md lacks the lost work:\n%s", md)
	}
	c, err = Compare(runs, "tiresias", TiresiasBinning)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Policies[1].Metrics.LostWork; l == nil || *l != 1000 {
		t.Errorf("comparison lost work %v, want 1000", l)
	}
	md := string(comparisonMarkdown(c))
	for _, row := range []string{"| fifo | 0 | 0 | n/a | 0 |", "| tiresias | 4 | 1000 | 250 | 1 |"} {
		if !strings.Contains(md, row) {
			t.Errorf("comparison.md lacks %q:\n%s", row, md)
		}
	}
}
