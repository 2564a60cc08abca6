package httpapi

import (
	"net/http"

	"github.com/themis-nomad/themis/planner"
)

// QueueResponse is /v1/queue: each virtual cluster's waiting jobs in the
// order the policy ranks them (without virtual clusters, one queue with vc
// "").
type QueueResponse struct {
	Policy string    `json:"policy"`
	VCs    []VCQueue `json:"vcs"`
}

// VCQueue is one virtual cluster's queue.
type VCQueue struct {
	VC   string   `json:"vc"`
	Jobs []Queued `json:"jobs"`
}

// Queued is one waiting job.
type Queued struct {
	// Position counts from 1 within the queue.
	Position  int    `json:"position"`
	Job       string `json:"job"`
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	GPUs      int    `json:"gpus"`
	// State is queued, waiting (granted GPUs another job still holds:
	// states.go), or suspended (preempted, waiting to resume).
	State string `json:"state"`
	// Reason says why it waits, as the decision core explained it.
	Reason string `json:"reason"`
	// Held describes how the planner holds it in Nomad (count 0, its
	// version tagged themis-held, the tag's description); "" when it is
	// not held yet.
	Held string `json:"held,omitempty"`
}

func buildQueue(v planner.View) QueueResponse {
	out := QueueResponse{Policy: v.Policy, VCs: []VCQueue{}}
	at := map[string]int{}
	for _, q := range v.Queue {
		i, ok := at[q.VC]
		if !ok {
			i = len(out.VCs)
			at[q.VC] = i
			out.VCs = append(out.VCs, VCQueue{VC: q.VC, Jobs: []Queued{}})
		}
		out.VCs[i].Jobs = append(out.VCs[i].Jobs, Queued{Position: q.Position, Job: jobName(q.Job),
			Namespace: q.Job.Namespace, JobID: q.Job.ID, GPUs: q.GPUs, State: ShownState(q.State, q.Reason), Reason: q.Reason, Held: q.Held})
	}
	return out
}

// queue serves /v1/queue; ?vc=NAME keeps one virtual cluster's queue.
func (s *Server) queue(r *http.Request, sn snapshot) (any, int) {
	vc, ok := r.URL.Query()["vc"]
	if !ok {
		return sn.doc.queue, http.StatusOK
	}
	out := QueueResponse{Policy: sn.doc.queue.Policy, VCs: []VCQueue{}}
	for _, q := range sn.doc.queue.VCs {
		if q.VC == vc[0] {
			out.VCs = append(out.VCs, q)
		}
	}
	return out, http.StatusOK
}
