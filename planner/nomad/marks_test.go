package nomad

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// blockingNomad answers the three lists with an index per table, holding
// a query that carries an index until its table moves above it or the
// query's wait ends (as Nomad's blocking queries do), or, when blocks is
// false, at once.
type blockingNomad struct {
	mu      sync.Mutex
	moved   *sync.Cond
	index   map[string]uint64
	blocks  bool
	queries map[string]int // by "path" and "path?index"
	// late holds every blocking query until its wait ends, whatever
	// moved (a watch whose answer has not reached the client yet).
	late bool
	// events are the event stream's lines, sent as they come.
	events chan string
}

func newBlockingNomad(blocks bool) *blockingNomad {
	f := &blockingNomad{index: map[string]uint64{"/v1/nodes": 10, "/v1/jobs": 20, "/v1/allocations": 30}, blocks: blocks, queries: map[string]int{},
		events: make(chan string, 8)}
	f.moved = sync.NewCond(&f.mu)
	return f
}

// set puts a table at an index (a write at that Raft index).
func (f *blockingNomad) set(path string, index uint64) {
	f.mu.Lock()
	f.index[path] = index
	f.mu.Unlock()
	f.moved.Broadcast()
}

func (f *blockingNomad) write(path string) {
	f.mu.Lock()
	f.index[path]++
	f.mu.Unlock()
	f.moved.Broadcast()
}

func (f *blockingNomad) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[key]
}

func (f *blockingNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/event/stream" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case line := <-f.events:
				_, _ = w.Write([]byte(line + "\n"))
				w.(http.Flusher).Flush()
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.URL.Path
	if i := r.URL.Query().Get("index"); i != "" {
		key += "?index"
		min, _ := strconv.ParseUint(i, 10, 64)
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		deadline := time.Now().Add(wait)
		for f.blocks && (f.late || f.index[r.URL.Path] <= min) && time.Now().Before(deadline) {
			go func() { time.Sleep(5 * time.Millisecond); f.moved.Broadcast() }()
			f.moved.Wait()
		}
	}
	f.queries[key]++
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(f.index[r.URL.Path], 10))
	_, _ = w.Write([]byte("[]"))
}

func markClient(t *testing.T, f *blockingNomad) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return NewClient(c, "", hclog.NewNullLogger())
}

// shortMarks makes c's watches wait wait, and end after idle unread.
func shortMarks(c *Client, wait, idle time.Duration) { c.marks.wait, c.marks.idle = wait, idle }

// The mark against a server that blocks: asked for once, then followed;
// a write to any table moves it once its watch answers, and the mark
// reads it without asking; a watch left unread ends, and the next mark
// asks again; the client's own write moves it at once.
func TestChangeMarkFollowsTheTables(t *testing.T) {
	f := newBlockingNomad(true)
	c := markClient(t, f)
	shortMarks(c, 300*time.Millisecond, time.Second)
	ctx := context.Background()
	m0, err := c.ChangeMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m0 != "nodes=10 jobs=20 allocs=30 writes=0 events=0" || c.MarkProbes() != 3 {
		t.Fatalf("first mark %q after %d probes, want the three indexes asked for", m0, c.MarkProbes())
	}
	for range 3 {
		if m, _ := c.ChangeMark(ctx); m != m0 || c.MarkProbes() != 3 {
			t.Fatalf("mark %q after %d probes with nothing written, want %q without asking", m, c.MarkProbes(), m0)
		}
		time.Sleep(100 * time.Millisecond)
	}
	last := m0
	for _, table := range []string{"/v1/allocations", "/v1/jobs", "/v1/nodes", "/v1/allocations"} {
		f.write(table)
		deadline := time.Now().Add(2 * time.Second)
		for {
			m, err := c.ChangeMark(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m != last {
				last = m
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a write to %s: the mark stayed %q", table, m)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if last != "nodes=11 jobs=21 allocs=32 writes=0 events=0" || c.MarkProbes() != 3 {
		t.Fatalf("mark %q after %d probes, want every write seen by the watches alone", last, c.MarkProbes())
	}
	c.wrote()
	if m, _ := c.ChangeMark(ctx); m != "nodes=11 jobs=21 allocs=32 writes=1 events=0" {
		t.Fatalf("the client's own write: mark %q", m)
	}
	// Unread for longer than idle: the watches end; the next mark asks.
	time.Sleep(2 * time.Second)
	if m, _ := c.ChangeMark(ctx); m != "nodes=11 jobs=21 allocs=32 writes=1 events=0" || c.MarkProbes() != 6 {
		t.Fatalf("after the watches ended: mark %q after %d probes, want the same mark asked for again (6 probes)", m, c.MarkProbes())
	}
}

// Against something that answers a blocking query at once (not Nomad, a
// proxy): the watch does not spin; every mark asks, as before watches.
func TestChangeMarkWithoutBlockingQueries(t *testing.T) {
	f := newBlockingNomad(false)
	c := markClient(t, f)
	shortMarks(c, 2*time.Second, 4*time.Second)
	ctx := context.Background()
	for i := range 5 {
		if _, err := c.ChangeMark(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if i == 2 {
			f.write("/v1/jobs")
		}
	}
	if m, _ := c.ChangeMark(ctx); !strings.Contains(m, "jobs=21") {
		t.Fatalf("mark %q, want the write seen", m)
	}
	if n := f.count("/v1/jobs?index"); n > 6 {
		t.Fatalf("%d blocking queries of the jobs table in 300 ms: the watch spins", n)
	}
	if c.MarkProbes() < 15 {
		t.Fatalf("%d probes for 6 marks: want each mark to ask for the three indexes", c.MarkProbes())
	}
}

// A table no write touched yet has index 0, at which Nomad does not block:
// its watch waits above 1 (a first write's Raft index is above it), so
// marks do not ask for it, and its first write moves the mark.
func TestChangeMarkWatchesAnEmptyTable(t *testing.T) {
	f := newBlockingNomad(true)
	f.set("/v1/allocations", 0)
	c := markClient(t, f)
	shortMarks(c, 300*time.Millisecond, time.Second)
	ctx := context.Background()
	m0, err := c.ChangeMark(ctx)
	if err != nil || m0 != "nodes=10 jobs=20 allocs=0 writes=0 events=0" {
		t.Fatalf("first mark %q, %v", m0, err)
	}
	for range 3 {
		time.Sleep(400 * time.Millisecond) // past a whole wait
		if m, _ := c.ChangeMark(ctx); m != m0 || c.MarkProbes() != 3 {
			t.Fatalf("mark %q after %d probes with nothing written, want %q without asking", m, c.MarkProbes(), m0)
		}
	}
	f.set("/v1/allocations", 44)
	deadline := time.Now().Add(2 * time.Second)
	for {
		m, _ := c.ChangeMark(ctx)
		if m == "nodes=10 jobs=20 allocs=44 writes=0 events=0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the empty table's first write: mark %q", m)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.MarkProbes() != 3 {
		t.Fatalf("%d probes: the empty table's watch did not hold", c.MarkProbes())
	}
}

// A write's event can reach the planner before its table's watch answers:
// the round the event triggers must not read the old mark and skip (the
// write would wait unseen for the resync). Watch counts the batch into
// the mark before it pokes; an evaluation's event alone moves nothing
// the mark follows.
func TestChangeMarkMovesWithTheEventThatPokes(t *testing.T) {
	f := newBlockingNomad(true)
	c := markClient(t, f)
	shortMarks(c, time.Second, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m0, err := c.ChangeMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.late = true
	f.mu.Unlock()
	marks := make(chan string, 4)
	go func() {
		_, _ = c.Watch(ctx, 0, func() {
			m, err := c.ChangeMark(ctx)
			if err != nil {
				m = err.Error()
			}
			marks <- m
		})
	}()
	f.events <- `{"Index":25,"Events":[{"Topic":"Evaluation","Type":"EvaluationUpdated","Key":"e1","Index":25}]}`
	if m := <-marks; m != m0 {
		t.Fatalf("an evaluation's event moved the mark from %q to %q", m0, m)
	}
	f.write("/v1/allocations")
	f.events <- `{"Index":31,"Events":[{"Topic":"Allocation","Type":"AllocationUpdated","Key":"a1","Index":31}]}`
	m := <-marks
	if m == m0 {
		t.Fatalf("the round an allocation's event poked read the mark %q from before the write", m)
	}
	if !strings.HasSuffix(m, "events=31") || c.MarkProbes() != 3 {
		t.Fatalf("mark %q after %d probes, want the event's index and no probe", m, c.MarkProbes())
	}
}
