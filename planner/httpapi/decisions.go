package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/themis-nomad/themis/planner"
)

// DecisionsResponse is /v1/decisions: the most recent decisions, oldest
// first.
type DecisionsResponse struct {
	Decisions []Decision `json:"decisions"`
}

// Decision is one thing the planner did: a grant, a preemption (or a
// revoke of a resubmitted job), a release or a promotion.
type Decision struct {
	// Seq numbers decisions from 1 since this planner process started.
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Job       string    `json:"job"`
	Namespace string    `json:"namespace"`
	JobID     string    `json:"job_id"`
	Node      string    `json:"node,omitempty"`
	GPUs      []string  `json:"gpus,omitempty"`
	LeaseID   string    `json:"lease_id,omitempty"`
	Reason    string    `json:"reason"`
}

func decisionOf(e planner.Event) Decision {
	return Decision{Time: e.Time.UTC(), Kind: e.Kind, Job: jobName(e.Job), Namespace: e.Job.Namespace, JobID: e.Job.ID,
		Node: e.Node, GPUs: e.GPUs, LeaseID: e.LeaseID, Reason: e.Reason}
}

// ring keeps the last n decisions.
type ring struct {
	buf  []Decision
	next int
	seq  uint64
}

func newRing(n int) *ring { return &ring{buf: make([]Decision, 0, n)} }

func (r *ring) add(d Decision) {
	r.seq++
	d.Seq = r.seq
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, d)
		return
	}
	r.buf[r.next] = d
	r.next = (r.next + 1) % len(r.buf)
}

// list returns the decisions oldest first, in a new slice.
func (r *ring) list() []Decision {
	out := make([]Decision, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// decisions serves /v1/decisions; ?limit=N keeps the newest N, ?job=ns/id
// one job's, ?kind=K one kind's.
func (s *Server) decisions(r *http.Request, sn snapshot) (any, int) {
	q := r.URL.Query()
	out := []Decision{}
	for _, d := range sn.decisions {
		if (q.Get("job") == "" || d.Job == q.Get("job")) && (q.Get("kind") == "" || d.Kind == q.Get("kind")) {
			out = append(out, d)
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return Error{Error: "limit: want a whole number, got " + strconv.Quote(s)}, http.StatusBadRequest
		}
		if n < len(out) {
			out = out[len(out)-n:]
		}
	}
	return DecisionsResponse{Decisions: out}, http.StatusOK
}
