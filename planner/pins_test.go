package planner

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/plannertest"
	"github.com/themis-nomad/themis/planner/stack"
)

// pinLog wraps the fakes to record, in the order they happen, the lease
// writes, pins and status writes of a round; the pin of changed is
// refused with nomad.ErrJobChanged (its user re-registered it meanwhile),
// and each pin takes hold, so that concurrent pins overlap.
type pinLog struct {
	*plannertest.Nomad
	store   *pinStore
	changed string
	hold    time.Duration

	mu       sync.Mutex
	events   []string
	inFlight int
	most     int
}

func (n *pinLog) note(e string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, e)
}

func (n *pinLog) Pin(ctx context.Context, j *nomad.Job, l lease.JobLease, pool string, restarts int) error {
	n.mu.Lock()
	n.inFlight++
	n.most = max(n.most, n.inFlight)
	n.events = append(n.events, "pin-start "+j.Key.ID)
	n.mu.Unlock()
	time.Sleep(n.hold) // a pin takes a while (a register in Nomad)
	var err error
	if j.Key.ID == n.changed {
		err = fmt.Errorf("pin %s: %w", j.Key, nomad.ErrJobChanged)
	} else {
		err = n.Nomad.Pin(ctx, j, l, pool, restarts)
	}
	n.mu.Lock()
	n.inFlight--
	n.events = append(n.events, "pin-end "+j.Key.ID)
	n.mu.Unlock()
	return err
}

type pinStore struct {
	*plannertest.Store
	log *pinLog
}

func (s *pinStore) Grant(ctx context.Context, l lease.JobLease) error {
	s.log.note("lease " + l.JobID)
	return s.Store.Grant(ctx, l)
}

func (s *pinStore) Release(ctx context.Context, l lease.JobLease, rec *lease.JobRecord) error {
	s.log.note("release " + l.JobID)
	return s.Store.Release(ctx, l, rec)
}

func (s *pinStore) WriteStatuses(ctx context.Context, puts []lease.JobStatus, dels []core.JobKey) (int, error) {
	s.log.note("statuses")
	return s.Store.WriteStatuses(ctx, puts, dels)
}

// A round that grants several jobs pins them concurrently once their
// leases committed (Config.PinWorkers), or one after another as before;
// either way every pin follows its own lease, the job whose pin finds it
// changed has its lease released and is queued again while the others
// stay granted, the statuses are written after every pin ended, and the
// log lines are the same.
func TestConcurrentPinsOfARunOfGrants(t *testing.T) {
	jobs := []string{"j1", "j2", "j3", "j4", "j5", "j6"}
	for _, tc := range []struct {
		workers  int
		changed  string
		overlap  bool // pins ran at once
		granted  int
		released int
	}{
		{workers: 1, granted: 6},
		{workers: 1, changed: "j3", granted: 5, released: 1},
		{workers: 8, overlap: true, granted: 6},
		{workers: 8, changed: "j3", overlap: true, granted: 5, released: 1},
		{workers: 2, changed: "j6", overlap: true, granted: 5, released: 1},
	} {
		t.Run(fmt.Sprintf("workers=%d/changed=%q", tc.workers, tc.changed), func(t *testing.T) {
			ctx := context.Background()
			clock := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
			fn := plannertest.NewCluster(&clock, 3, 4)
			n := &pinLog{Nomad: fn, changed: tc.changed, hold: 50 * time.Millisecond}
			fs := &pinStore{Store: plannertest.NewStore(), log: n}
			n.store = fs
			var logs bytes.Buffer
			p := New(Config{Nomad: n, Store: fs, Stack: mustStack(t, "fifo", stack.Options{}), Now: func() time.Time { return clock },
				PinWorkers: tc.workers, Log: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
			for _, id := range jobs {
				fn.Submit(id, 2, "be", "30s")
			}
			err := p.Reconcile(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Every pin follows its own lease; the statuses follow every pin.
			at := func(e string) int { return slices.Index(n.events, e) }
			for _, id := range jobs {
				l, s, e := at("lease "+id), at("pin-start "+id), at("pin-end "+id)
				if l < 0 || s < l || e < s {
					t.Errorf("%s: lease at %d, pin from %d to %d in %v", id, l, s, e, n.events)
				}
				if st := at("statuses"); st < e {
					t.Errorf("statuses written at %d, before %s's pin ended at %d: %v", st, id, e, n.events)
				}
			}
			if got := n.most > 1; got != tc.overlap {
				t.Errorf("at most %d pins at once, want overlap %v: %v", n.most, tc.overlap, n.events)
			}
			if n.most > tc.workers {
				t.Errorf("%d pins at once, more than %d workers", n.most, tc.workers)
			}
			if tc.workers == 1 {
				// One after another, as before: each pin ends before the
				// next lease.
				for i, id := range jobs[1:] {
					if at("lease "+id) < at("pin-end "+jobs[i]) {
						t.Errorf("workers 1: lease %s before %s's pin ended: %v", id, jobs[i], n.events)
					}
				}
			}
			for _, id := range jobs {
				k := core.JobKey{Namespace: "default", ID: id}
				_, leased := fs.JobLeases[k]
				st := fs.JobStatuses[k]
				pinned := *fn.Jobs[k].Status == "running" // the fake's pin
				switch {
				case id == tc.changed:
					if leased || pinned || st.State != "queued" || st.Reason != "changed while being granted" {
						t.Errorf("%s (changed): leased %v, pinned %v, status %+v; want its lease released and queued", id, leased, pinned, st)
					}
				case !leased || !pinned || st.State != "granted":
					t.Errorf("%s: leased %v, pinned %v, status %+v; want granted", id, leased, pinned, st)
				}
			}
			plannertest.CheckNoTaskWithoutLease(t, fn, fs.Store, "after the round")
			plannertest.CheckGPUsLeasedOnce(t, fs.Store)
			out := logs.String()
			if got := strings.Count(out, "granted: job="); got != tc.granted {
				t.Errorf("%d granted lines, want %d:\n%s", got, tc.granted, out)
			}
			if got := strings.Count(out, `why="job changed while being granted"`); got != tc.released {
				t.Errorf("%d released lines for a changed job, want %d:\n%s", got, tc.released, out)
			}
			// The next round grants the changed job again (its user's new
			// version, as read then) and pins it.
			if tc.changed != "" {
				n.changed = ""
				clock = clock.Add(time.Second)
				if err := p.Reconcile(ctx); err != nil {
					t.Fatal(err)
				}
				k := core.JobKey{Namespace: "default", ID: tc.changed}
				if _, ok := fs.JobLeases[k]; !ok || fs.JobStatuses[k].State != "granted" {
					t.Errorf("next round: %s leased %v, status %+v; want granted", tc.changed, ok, fs.JobStatuses[k])
				}
			}
		})
	}
}
