package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// Exit codes of themis job run.
const (
	codeRunning     = 0
	codeFailed      = 1
	codeInterrupted = 130
)

// follower follows a submitted themis job to "running", printing each
// step once: what the planner says of it (its API, or Consul's status
// records) and what Nomad says of its allocations.
type follower struct {
	out io.Writer
	// job is "<namespace>/<id>", task its themis task.
	job, task string
	// submitIndex is the JobModifyIndex the submission got, submitted
	// when it was made: what the planner says of an older version is
	// not about this submission.
	submitIndex uint64
	submitted   time.Time

	said    string // the last planner line printed
	granted bool
	parts   int // allocations the lease places (1, or a gang's parts)
	ran     bool
}

// plannerJob is what the planner says of the job, from its API or from
// Consul's status record (fromConsul: then seen by its time).
type plannerJob struct {
	doc        httpapi.Job
	fromConsul bool
}

// followEvent is one observation: the planner's, Nomad's, or an error.
type followEvent struct {
	planner *plannerJob
	allocs  []*nomadapi.AllocationListStub
	warn    string
	err     error
}

// step takes one observation; done says the follow is over, with code.
func (f *follower) step(ev followEvent, now time.Time) (done bool, code int) {
	switch {
	case ev.err != nil:
		f.line(now, "error: "+ev.err.Error())
		return true, codeFailed
	case ev.warn != "":
		f.line(now, ev.warn)
	case ev.planner != nil:
		return f.onPlanner(*ev.planner, now)
	case ev.allocs != nil:
		return f.onAllocs(ev.allocs, now)
	}
	return false, 0
}

func (f *follower) line(now time.Time, what string) {
	fmt.Fprintf(f.out, "    %s: %s\n", stamp(now), safe(what))
}

// seen reports whether the planner's word is about this submission: its
// API names the job version it read; a status record (the fallback) is
// taken once written after the submission, or 10 s after it (a round
// follows a submission within a second; the two clocks may differ).
func (f *follower) seen(pj plannerJob, now time.Time) bool {
	if pj.fromConsul {
		return !pj.doc.Since.Before(f.submitted) || now.Sub(f.submitted) > 10*time.Second
	}
	return pj.doc.ModifyIndex >= f.submitIndex
}

func (f *follower) onPlanner(pj plannerJob, now time.Time) (bool, int) {
	j := pj.doc
	if !f.seen(pj, now) {
		return false, 0
	}
	say := func(s string) {
		if s != f.said {
			f.said = s
			f.line(now, s)
		}
	}
	switch j.State {
	case "queued", httpapi.StateWaiting, "suspended":
		where := j.State
		if j.Queue != nil && j.Queue.Position > 0 {
			where += fmt.Sprintf(": position %d in its queue", j.Queue.Position)
		}
		if j.Held != "" {
			// Nomad shows it dead (count 0): say why.
			where = "held by the planner (dead at count 0 in Nomad, tagged " + nomad.HeldTag + "): " + where
		}
		say(where + ": " + j.Reason)
	case "granted", "revoking":
		if l := j.Lease; l != nil && (pj.fromConsul || l.SubmitIndex >= f.submitIndex) && !f.granted {
			f.granted = true
			f.parts = max(1, len(l.Parts))
			if pj.fromConsul {
				f.parts = max(1, len(strings.Split(l.NodeName, ",")))
			}
			what := fmt.Sprintf("granted: %s on %s (%s)", plural(len(l.GPUs), "GPU"), nodeNames(*l), strings.Join(l.GPUs, ","))
			if l.LeaseID != "" {
				what += ", lease " + l.LeaseID
			}
			say(what)
		}
		if j.State == "revoking" {
			say("being preempted: " + j.Reason)
		}
	case "rejected":
		say("rejected: " + j.Reason)
		return true, codeFailed
	case planner.StatePurged:
		say("purged from Nomad while held by the planner: " + j.Reason)
		return true, codeFailed
	case "unreadable":
		say("set aside by the planner (it cannot read the job or its records): " + j.Reason)
	case "failed", "lost":
		say(j.State + ": " + j.Reason)
		return true, codeFailed
	case "finished":
		if f.granted || f.ran {
			say("finished")
			return true, codeRunning
		}
	}
	return false, 0
}

func (f *follower) onAllocs(allocs []*nomadapi.AllocationListStub, now time.Time) (bool, int) {
	running, complete := 0, 0
	var nodes, ids []string
	for _, a := range allocs {
		if a.CreateIndex <= f.submitIndex {
			continue // an older version's
		}
		switch a.ClientStatus {
		case nomadapi.AllocClientStatusRunning:
			if ts := a.TaskStates[f.task]; ts == nil || ts.State == "running" {
				running++
				nodes, ids = append(nodes, a.NodeName), append(ids, shortID(a.ID))
			}
		case nomadapi.AllocClientStatusComplete:
			complete++
			nodes, ids = append(nodes, a.NodeName), append(ids, shortID(a.ID))
		case nomadapi.AllocClientStatusFailed, nomadapi.AllocClientStatusLost:
			if !f.ran {
				f.line(now, a.ClientStatus+": "+nomad.Failure(a.ClientStatus, a.ClientDescription, f.task, a.TaskStates[f.task]))
				return true, codeFailed
			}
		}
	}
	want := max(1, f.parts)
	if running+complete >= want && !f.ran {
		f.ran = true
		f.line(now, fmt.Sprintf("running: allocation %s on %s (%.1fs after submitting)", strings.Join(ids, ","), strings.Join(nodes, ","),
			now.Sub(f.submitted).Seconds()))
		return true, codeRunning
	}
	return false, 0
}

func shortID(id string) string { return id[:min(8, len(id))] }

// followSources are where the follower reads from.
type followSources struct {
	nomad         *nomadapi.Client
	namespace, id string
	themis        string
	consulAddr    string
	warn          func(string)
}

// run follows until the job runs, fails or ctx ends.
func (f *follower) run(ctx context.Context, src followSources) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan followEvent, 16)
	send := func(ev followEvent) {
		select {
		case events <- ev:
		case <-ctx.Done():
		}
	}
	go src.watchPlanner(ctx, send)
	go src.watchAllocs(ctx, send)
	for {
		select {
		case <-ctx.Done():
			return codeInterrupted
		case ev := <-events:
			if done, code := f.step(ev, time.Now()); done {
				return code
			}
		}
	}
}

// watchPlanner follows the job in the planner's API with blocking
// queries; where no planner serves it, in Consul's status records.
func (s followSources) watchPlanner(ctx context.Context, send func(followEvent)) {
	c := &httpapi.Client{Addr: s.themis}
	path := "/v1/jobs/" + url.PathEscape(s.namespace) + "/" + url.PathEscape(s.id)
	var index uint64
	for ctx.Err() == nil {
		var j httpapi.Job
		idx, err := c.Get(ctx, path, index, time.Minute, &j)
		switch {
		case errors.Is(err, httpapi.ErrNotServed) && index == 0:
			s.watchConsul(ctx, send, err)
			return
		case err != nil && idx > 0:
			// Not seen yet (404): wait for the view to change.
		case err != nil:
			if ctx.Err() == nil {
				time.Sleep(time.Second)
			}
		default:
			send(followEvent{planner: &plannerJob{doc: j}})
		}
		if idx > 0 {
			index = idx
		}
	}
}

// watchConsul polls the job's status record and lease.
func (s followSources) watchConsul(ctx context.Context, send func(followEvent), why error) {
	cfg := consulapi.DefaultConfig()
	if s.consulAddr != "" {
		cfg.Address = s.consulAddr
	}
	send(followEvent{warn: fmt.Sprintf("no planner API at %s (%v): following the job through Consul's status records at %s", s.themis, why, cfg.Address)})
	cc, err := consulapi.NewClient(cfg)
	if err != nil {
		send(followEvent{err: err})
		return
	}
	key := lease.StatusKey(core.JobKey{Namespace: s.namespace, ID: s.id})
	var index uint64
	warned := false
	for ctx.Err() == nil {
		p, meta, err := cc.KV().Get(key, (&consulapi.QueryOptions{WaitIndex: index, WaitTime: time.Minute}).WithContext(ctx))
		if err != nil {
			if !warned && ctx.Err() == nil {
				// A user's token may not read Consul: Nomad's
				// allocations still tell when the job runs or fails.
				warned = true
				send(followEvent{warn: fmt.Sprintf("cannot read %s (%v): following Nomad's allocations alone, which tell when it runs, not why it waits", key, err)})
			}
			time.Sleep(time.Second)
			continue
		}
		index = meta.LastIndex
		if p == nil {
			continue
		}
		var st lease.JobStatus
		if err := json.Unmarshal(p.Value, &st); err != nil {
			send(followEvent{warn: fmt.Sprintf("%s: %v", key, err)})
			continue
		}
		j := httpapi.Job{Job: s.namespace + "/" + s.id, State: httpapi.ShownState(st.State, st.Reason), Reason: st.Reason, Since: st.Since}
		if st.State == "granted" || st.State == "revoking" {
			l := &httpapi.Lease{Job: j.Job}
			l.LeaseID, l.NodeName, l.GPUs = st.LeaseID, st.Node, st.GPUs
			j.Lease = l
		}
		send(followEvent{planner: &plannerJob{doc: j, fromConsul: true}})
	}
}

// watchAllocs follows the job's allocations in Nomad with blocking
// queries (filtered by job, so that an ID with a "/" is not misrouted).
func (s followSources) watchAllocs(ctx context.Context, send func(followEvent)) {
	filter := "JobID == " + strconv.Quote(s.id)
	var index uint64
	for ctx.Err() == nil {
		q := (&nomadapi.QueryOptions{Namespace: s.namespace, Filter: filter, WaitIndex: index, WaitTime: time.Minute}).WithContext(ctx)
		allocs, meta, err := s.nomad.Allocations().List(q)
		if err != nil {
			if ctx.Err() == nil {
				time.Sleep(time.Second)
			}
			continue
		}
		index = meta.LastIndex
		if allocs == nil {
			allocs = []*nomadapi.AllocationListStub{}
		}
		send(followEvent{allocs: allocs})
	}
}
