package planner

import (
	"context"
	"github.com/themis-nomad/themis/planner/plannertest"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// A job whose grace period exceeds the clients' max_kill_timeout is
// rejected, naming the field, rather than granted and cut short by Nomad;
// the jobs around it are not disturbed.
func TestGraceLongerThanMaxKillTimeoutIsRejected(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	fn, fs := plannertest.NewNomad(&clock, 8), plannertest.NewStore()
	p := New(Config{Nomad: fn, Store: fs, Stack: stack.Of(policies.FIFO{}), Now: func() time.Time { return clock }, MaxKillTimeout: 30 * time.Minute})
	fn.Submit("long-grace", 2, "be", "2h")
	fn.Submit("ok", 2, "be", "30m")
	if err := p.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	st := fs.JobStatuses[core.JobKey{Namespace: "default", ID: "long-grace"}]
	if st.State != "rejected" || !strings.Contains(st.Reason, "themis.grace_period: 2h0m0s is longer than the Nomad clients' max_kill_timeout (30m0s)") {
		t.Errorf("status of long-grace: %+v", st)
	}
	if _, leased := fs.JobLeases[core.JobKey{Namespace: "default", ID: "long-grace"}]; leased {
		t.Error("long-grace was granted")
	}
	if _, leased := fs.JobLeases[core.JobKey{Namespace: "default", ID: "ok"}]; !leased {
		t.Error("the job with a grace period within the cap was not granted")
	}
}
