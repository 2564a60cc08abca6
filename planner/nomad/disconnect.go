package nomad

import (
	"time"

	"github.com/hashicorp/nomad/api"
)

// DefaultStopOnClientAfter is the `disconnect { stop_on_client_after }`
// every pin sets on the themis group unless SetStopOnClientAfter (the
// planner's -stop-on-client-after) says otherwise: a Nomad client that has
// not reached its servers for this long stops the group's allocations
// itself (Nomad 1.8+, client/heartbeatstop.go), through the driver's
// StopTask with the task's kill_timeout (the workload checkpoints). It
// bounds how long a task of an allocation the servers marked lost can still
// run on a client that lives on cut off from them (a partition), which is
// what lets the planner count a lost allocation's GPUs free again at all
// (planner/lost.go) without two copies of a job running at once.
//
// A client killed outright (kill -9: its tasks' executors live on) stops
// nothing until it is started again; it then learns from the servers that
// the allocation is to stop and kills it. The themis driver refuses to
// start another allocation's task on a GPU such a task still holds
// (driver/gpuholds.go).
//
// The cost of a short one: every client stops its themis tasks when the
// servers are all unreachable for that long (a whole Nomad server cluster
// down, not a leader election), and a batch task that exits 0 after its
// checkpoint then completes its job for good, as `nomad alloc stop` does
// (docs/design.md). The cost of a long one: a job whose node died waits
// that much longer before it re-queues. 2 minutes is far above a leader
// election and Nomad's heartbeat grace.
const DefaultStopOnClientAfter = 2 * time.Minute

// SetStopOnClientAfter sets the stop_on_client_after pins set (0:
// DefaultStopOnClientAfter). The planner's lost bound must use the same
// (planner.Config.StopOnClientAfter).
func (c *Client) SetStopOnClientAfter(d time.Duration) { c.stopOnClientAfter = d }

// StopOnClientAfter is the stop_on_client_after pins set.
func (c *Client) StopOnClientAfter() time.Duration {
	if c.stopOnClientAfter <= 0 {
		return DefaultStopOnClientAfter
	}
	return c.stopOnClientAfter
}

// setDisconnect makes tg's disconnect block stop_on_client_after = stop
// and nothing else: lost_after (and the deprecated
// max_client_disconnect and stop_after_client_disconnect) would keep the
// allocation "unknown" instead of lost, and Nomad refuses lost_after beside
// stop_on_client_after. Nomad takes it for service and batch jobs only; a
// job of another type keeps its group as it is.
func setDisconnect(job *api.Job, tg *api.TaskGroup, stop time.Duration) {
	if job.Type != nil && *job.Type != api.JobTypeService && *job.Type != api.JobTypeBatch {
		return
	}
	tg.Disconnect = &api.DisconnectStrategy{StopOnClientAfter: &stop}
	tg.MaxClientDisconnect = nil
	tg.StopAfterClientDisconnect = nil
}
