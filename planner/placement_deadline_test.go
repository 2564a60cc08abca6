package planner

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// A granted job that Nomad never places (a constraint the pin keeps,
// memory or a static port the node lacks) does not keep its GPUs leased
// and idle: past the placement deadline (DefaultGangPlaceTimeout after
// the grant) its lease is taken back, saying why, and the job re-queues.
func TestNoLeaseWithoutAPlacement(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	var logs bytes.Buffer
	h.config.Log = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	h.Restart()
	h.Nomad.Submit("stuck", 8, "be", "10s")
	h.Round("stuck granted")
	k := core.JobKey{Namespace: "default", ID: "stuck"}
	first, ok := h.Store.JobLeases[k]
	if !ok {
		t.Fatalf("stuck not granted: %+v", h.Store.JobStatuses[k])
	}
	delete(h.Nomad.Allocs, k) // Nomad could not place it
	for range 4 {
		h.Clock = h.Clock.Add(time.Minute)
		h.Round("a minute on")
	}
	if l, ok := h.Store.JobLeases[k]; ok && l.LeaseID == first.LeaseID {
		t.Fatalf("stuck keeps its lease %s four minutes after the grant with no allocation", l.LeaseID)
	}
	if !strings.Contains(logs.String(), "no placement: Nomad placed no allocation of the job on dev-node within 2m0s of the grant") {
		t.Errorf("the planner does not say why it took the lease back:\n%s", logs.String())
	}
}
