package nomad

import (
	"time"

	"github.com/hashicorp/nomad/api"
)

// StopOnClientAfter is the `disconnect { stop_on_client_after }` every pin
// sets on the themis group: a Nomad client that has not reached its servers
// for this long stops the group's allocations itself (Nomad 1.8+,
// client/heartbeatstop.go), with the task's kill_timeout. It bounds how long
// a task of an allocation the servers marked lost can still run on a client
// that lives on cut off from them (a partition), which is what lets the
// planner count a lost allocation's GPUs free again at all (planner/lost.go).
//
// A client killed outright (kill -9: its tasks' executors live on) stops
// nothing until it is started again; it then learns from the servers that
// the allocation is to stop and kills it. The themis driver refuses to
// start another allocation's task on a GPU such a task still holds
// (driver/gpuholds.go).
//
// 30 s is longer than Nomad's default heartbeat grace, so a client that
// only missed a heartbeat or two (a server leader election) keeps its
// tasks.
const StopOnClientAfter = 30 * time.Second

// setDisconnect makes tg's disconnect block stop_on_client_after =
// StopOnClientAfter and nothing else: lost_after (and the deprecated
// max_client_disconnect and stop_after_client_disconnect) would keep the
// allocation "unknown" instead of lost, and Nomad refuses lost_after beside
// stop_on_client_after. Nomad takes it for service and batch jobs only; a
// job of another type keeps its group as it is.
func setDisconnect(job *api.Job, tg *api.TaskGroup) {
	if job.Type != nil && *job.Type != api.JobTypeService && *job.Type != api.JobTypeBatch {
		return
	}
	stop := StopOnClientAfter
	tg.Disconnect = &api.DisconnectStrategy{StopOnClientAfter: &stop}
	tg.MaxClientDisconnect = nil
	tg.StopAfterClientDisconnect = nil
}
