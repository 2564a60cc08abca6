package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

const graceBoundVCs = `
vc "trial" {
  policy = "fitgpp"
  cells {
    type  = "node8"
    count = 1
  }
  namespace "*" {}
  max_grace_period = "1m"
}
`

// A VC's max_grace_period bounds how long one job may make a preemptor
// wait: a job asking for more is rejected naming the rule, and a running
// job admitted before the bound (a reload lowered it) is revoked with the
// VC's bound as its deadline, not its own 30 minutes.
func TestVCBoundsTheGracePeriod(t *testing.T) {
	open := strings.Replace(graceBoundVCs, `  max_grace_period = "1m"`+"\n", "", 1)
	h := newHarness(t, 8, vcsStack(t, "fifo", "open.hcl", open))
	h.Nomad.SubmitIn("slow", 8, "be", "30m", "trial", 0)
	h.Round("slow runs")
	slow := core.JobKey{Namespace: "default", ID: "slow"}
	if _, ok := h.Store.JobLeases[slow]; !ok {
		t.Fatalf("slow not granted: %+v", h.Store.JobStatuses[slow])
	}
	h.P.SetStack(vcsStack(t, "fifo", "bound.hcl", graceBoundVCs))
	h.Nomad.SubmitIn("long", 1, "be", "30m", "trial", 0)
	h.Nomad.SubmitIn("te", 8, "te", "10s", "trial", 0)
	h.Round("te preempts slow")
	long := h.Store.JobStatuses[core.JobKey{Namespace: "default", ID: "long"}]
	if long.State != "rejected" || !strings.Contains(long.Reason, "themis.grace_period: 30m0s") || !strings.Contains(long.Reason, "max_grace_period = 1m0s") {
		t.Errorf("long: %s (%s), want rejected naming themis.grace_period and max_grace_period", long.State, long.Reason)
	}
	l := h.Store.JobLeases[slow]
	if l.Revoke == nil {
		t.Fatalf("slow not revoked: %+v", h.Store.JobStatuses[slow])
	}
	if d := l.Revoke.Deadline.Sub(l.Revoke.Since); d != time.Minute {
		t.Errorf("slow's revoke deadline is %s after it began, want the VC's bound, 1m", d)
	}
}
