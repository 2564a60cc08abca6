package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
)

// themis status -queue reads the leader's queue, following a standby's
// answer to the leader, and prints each VC's jobs with position and reason;
// without an API it says so (ErrNotServed), and the fallback lists
// Consul's queued records without positions.
func TestStatusQueue(t *testing.T) {
	k := func(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }
	lead := httpapi.New(httpapi.Options{ID: "p1"})
	lead.SetLeading(true)
	lead.Publish(planner.View{Decided: true, Policy: "fifo", Queue: []planner.Queued{
		{Job: k("a"), VC: "vision", Position: 1, GPUs: 4, State: "queued", Reason: "behind nothing"},
		{Job: k("b"), VC: "vision", Position: 2, GPUs: 2, State: "suspended", Reason: `behind default/a in virtual cluster "vision"'s fifo queue`},
		{Job: k("c"), VC: "speech", Position: 1, GPUs: 8, State: "queued", Reason: "waiting for 8 free GPUs (0 free)"},
	}})
	leader := httptest.NewServer(lead.Handler())
	defer leader.Close()
	standby := httptest.NewServer(httpapi.New(httpapi.Options{ID: "p2", Leader: func(context.Context) (httpapi.Leader, error) {
		return httpapi.Leader{ID: "p1", API: leader.URL}, nil
	}}).Handler())
	defer standby.Close()
	ctx := context.Background()
	for _, addr := range []string{leader.URL, standby.URL} {
		q, err := (&httpapi.Client{Addr: addr}).Queue(ctx)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		var out bytes.Buffer
		printQueue(&out, q, false)
		want := []string{
			"VC      POS  JOB        GPUS  STATE      REASON",
			"vision  1    default/a  4     queued     behind nothing",
			`vision  2    default/b  2     suspended  behind default/a in virtual cluster "vision"'s fifo queue`,
			"speech  1    default/c  8     queued     waiting for 8 free GPUs (0 free)",
		}
		if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", addr, out.String(), strings.Join(want, "\n"))
		}
	}

	dead := httptest.NewServer(nil)
	dead.Close()
	if _, err := (&httpapi.Client{Addr: dead.URL}).Queue(ctx); !errors.Is(err, httpapi.ErrNotServed) {
		t.Errorf("nothing listening: %v, want ErrNotServed", err)
	}
	var out bytes.Buffer
	now := time.Now()
	printQueue(&out, queueFromStatuses([]lease.JobStatus{
		{Namespace: "default", JobID: "late", State: "queued", Reason: "r2", Since: now.Add(time.Second)},
		{Namespace: "default", JobID: "run", State: "granted", Since: now},
		{Namespace: "default", JobID: "early", State: "suspended", Reason: "r1", Since: now},
	}), false)
	want := "VC  POS  JOB            GPUS  STATE      REASON\n" +
		"-   -    default/early  -     suspended  r1\n" +
		"-   -    default/late   -     queued     r2\n"
	if out.String() != want {
		t.Errorf("fallback:\n%s\nwant\n%s", out.String(), want)
	}
}
