package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
)

// JobsResponse is /v1/jobs: every themis job Nomad has.
type JobsResponse struct {
	Jobs []*Job `json:"jobs"`
}

// Job is /v1/jobs/<namespace>/<id>: one themis job, what it asked for, its
// status, its lease, its place in the queue, its service record and (in
// /v1/jobs/<ns>/<id> only) its recent decisions.
type Job struct {
	Job       string `json:"job"`
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	// State is queued, waiting (granted GPUs another job still holds:
	// states.go), granted, revoking, suspended, rejected, unreadable,
	// purged, or how it ended: finished, failed or lost; Reason why
	// it waits, was rejected or failed (Nomad's reason); Since when it
	// entered that state.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Held is how the planner holds a waiting job in Nomad: the
	// description of its held version's tag (themis-held); "" when the
	// job is not held.
	Held     string    `json:"held,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	Deadline time.Time `json:"deadline,omitzero"`
	// ModifyIndex is the JobModifyIndex of the job version the planner
	// last read: a submission at or before it has been seen (a client
	// following its submission waits for it; the pin moves it on).
	ModifyIndex uint64 `json:"modify_index,omitempty"`
	// Request is the job's themis stanza (nil when it was rejected).
	Request *Request `json:"request,omitempty"`
	// Progress is the job's last progress report (nil: none).
	Progress *Progress `json:"progress,omitempty"`
	// Lease is the job's lease (nil: none); Queue its place in its
	// queue (nil: not waiting).
	Lease *Lease  `json:"lease,omitempty"`
	Queue *Queued `json:"queue,omitempty"`
	// Record is its service so far under leases that ended.
	Record Record `json:"record"`
	// Decisions are its recent decisions, oldest first.
	Decisions []Decision `json:"decisions,omitempty"`
}

// Request is what a job's themis stanza asks for.
type Request struct {
	GPUs     int    `json:"gpus"`
	VC       string `json:"vc,omitempty"`
	Priority int    `json:"priority"`
	Class    string `json:"class,omitempty"`
	// App is the stanza's app ("": the job is an app of its own),
	// Iterations the work it plans (0: not said), Model what it trains.
	App        string `json:"app,omitempty"`
	Iterations int    `json:"iterations,omitempty"`
	Model      string `json:"model,omitempty"`
}

// Progress is a job's last progress report, as its workload made it
// through the task driver.
type Progress struct {
	Iteration int64    `json:"iteration"`
	Total     int64    `json:"total,omitempty"`
	Loss      *float64 `json:"loss,omitempty"`
	// Rate is the iterations per second the driver measured.
	Rate float64   `json:"rate,omitempty"`
	At   time.Time `json:"at"`
}

// Record is a job's service record.
type Record struct {
	FirstSubmit time.Time `json:"first_submit,omitzero"`
	FirstStart  time.Time `json:"first_start,omitzero"`
	Executed    float64   `json:"executed_s"`
	Attained    float64   `json:"attained_gpu_s"`
	Preemptions int       `json:"preemptions"`
	PromotedAt  time.Time `json:"promoted_at,omitzero"`
}

func buildJobs(v planner.View, d *docs) (map[core.JobKey]*Job, JobsResponse) {
	leases := map[string]*Lease{}
	for i := range d.leases.Leases {
		leases[d.leases.Leases[i].Job] = &d.leases.Leases[i]
	}
	queued := map[string]*Queued{}
	for i := range d.queue.VCs {
		for j := range d.queue.VCs[i].Jobs {
			q := &d.queue.VCs[i].Jobs[j]
			queued[q.Job] = q
		}
	}
	byKey := map[core.JobKey]*Job{}
	list := JobsResponse{Jobs: []*Job{}}
	for _, j := range v.Jobs {
		name := jobName(j.Key)
		x := &Job{Job: name, Namespace: j.Key.Namespace, JobID: j.Key.ID, State: ShownState(j.Status.State, j.Status.Reason), Reason: j.Status.Reason, Held: j.Status.Held,
			Since: j.Status.Since.UTC(), Deadline: j.Status.Deadline.UTC(), Lease: leases[name], Queue: queued[name],
			Record: Record{FirstSubmit: j.Record.FirstSubmit.UTC(), FirstStart: j.Record.FirstStart.UTC(), Executed: j.Record.Executed,
				Attained: j.Record.Attained, Preemptions: j.Record.Preemptions, PromotedAt: j.Record.PromotedAt.UTC()}}
		if j.Valid {
			x.Request = &Request{GPUs: j.GPUs, VC: j.VC, Priority: j.Priority, Class: j.Class, App: j.App, Iterations: j.Iterations, Model: j.Model}
		}
		x.ModifyIndex = j.ModifyIndex
		if p := j.Progress; p != nil {
			x.Progress = &Progress{Iteration: p.Iteration, Total: p.Total, Loss: p.Loss, Rate: p.Rate, At: p.At.UTC()}
		}
		byKey[j.Key] = x
		list.Jobs = append(list.Jobs, x)
	}
	return byKey, list
}

func (s *Server) jobs(_ *http.Request, sn snapshot) (any, int) { return sn.doc.list, http.StatusOK }

// job serves /v1/jobs/<namespace>/<id> (each part path-escaped).
func (s *Server) job(r *http.Request, sn snapshot) (any, int) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/jobs/")
	ns, id, ok := strings.Cut(rest, "/")
	if ok && !strings.Contains(id, "/") {
		var err1, err2 error
		ns, err1 = url.PathUnescape(ns)
		id, err2 = url.PathUnescape(id)
		ok = err1 == nil && err2 == nil && ns != "" && id != ""
	} else {
		ok = false
	}
	if !ok {
		return Error{Error: "want /v1/jobs/<namespace>/<job id>"}, http.StatusBadRequest
	}
	j, found := sn.doc.jobs[core.JobKey{Namespace: ns, ID: id}]
	if !found {
		return Error{Error: "no themis job " + ns + "/" + id}, http.StatusNotFound
	}
	x := *j
	for _, d := range sn.decisions {
		if d.Job == x.Job {
			x.Decisions = append(x.Decisions, d)
		}
	}
	return x, http.StatusOK
}
