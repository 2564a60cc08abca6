package nomad

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Nomad's change mark without a request in the rounds where nothing moved
// (planner.ChangeMarker; planner/steady.go). A round that ends unchanged
// asked Nomad for its three tables' indexes, three one-row lists at once:
// on a loaded server (one spending most of a core on idle clients) each
// took ~8 ms, most of a skipped round. Instead, once a table's index is
// known, a blocking query (the same one-row list, waiting above that
// index) waits on Nomad for the table to move; the mark reads what it
// found, and asks Nomad again only for a table whose watch is not armed
// (the first mark, a watch that failed, one left idle). A table that
// moved is watched again from the index its watch saw, when the next
// mark reads it: the watches cost a request per round that reads a
// change, not per write (a busy allocations table moves hundreds of
// times a second).
//
// A watch reports a write a moment after Nomad applies it, where a probe
// reports what Nomad holds when it answers: either way a write that
// lands after the mark is read waits for the next round. The planner's
// own writes (its registrations) are counted into the mark at once, so
// the round after a round that wrote always runs, as before.
//
// The next round is the one the write's event triggers (Watch), and that
// event can reach the planner before the watch's answer does: a round it
// triggered would then read the old index, skip, and leave the write
// unseen until something else ran a round (the resync, 30 s by default).
// So the highest index of the events that write those tables is part of
// the mark too, counted before Watch pokes the planner: a round an event
// triggered always runs. The watches are still what sees the writes Nomad
// sends no event for (garbage collection).

// markWait is how long one blocking query waits on Nomad; a watch that no
// mark read for markIdle ends there (and the next mark asks Nomad).
const (
	markWait = 30 * time.Second
	markIdle = 2 * markWait
)

// marks is the client's three table watches and its own writes.
type marks struct {
	tables [3]tableWatch
	writes atomic.Uint64
	// events is the highest Raft index of an event stream batch's
	// writes to the three tables (sawEvents).
	events atomic.Uint64
	// wait and idle are markWait and markIdle unless a test set them
	// before the first mark.
	wait, idle time.Duration
	// probeOnly: no watches (SetMarkWatches).
	probeOnly bool
	// probes counts the indexes the marks asked Nomad for at once (for
	// tests and measurements).
	probes atomic.Int64
}

// tableWatch follows one table's index.
type tableWatch struct {
	mu sync.Mutex
	// armed: a watch waits above base, or found the table at moved
	// (> base) and ended.
	armed       bool
	base, moved uint64
	// gen tells a watch that its table was re-armed from another base
	// (it then ends without a word).
	gen      uint64
	lastRead time.Time
}

// markTables names the tables, in the mark's order.
var markTables = [3]string{"nodes", "jobs", "allocations"}

// tableProbe is table i's one-row list with query q (Snapshot's).
func (c *Client) tableProbe(i int, q api.QueryOptions) (uint64, error) {
	switch i {
	case 0:
		return tableIndex(c.api.Nodes().List, q)
	case 1:
		return tableIndex(c.api.Jobs().List, q)
	}
	return tableIndex(c.api.Allocations().List, q)
}

// tableQuery is table i's list query, as Snapshot makes it.
func tableQuery(ctx context.Context, i int) api.QueryOptions {
	if i == 0 {
		return *nodesQuery(ctx)
	}
	return *everyNamespace(ctx)
}

// ChangeMark is the node, job and allocation tables' indexes, as their
// watches last saw them or, for a table not watched, asked for as
// Snapshot asks (a list of one row), with the client's own writes: every
// write to those tables raises its index, so an equal mark means nothing
// Snapshot reads changed (planner.ChangeMarker).
func (c *Client) ChangeMark(ctx context.Context) (string, error) {
	now := time.Now()
	var idx [3]uint64
	var errs [3]error
	var wg sync.WaitGroup
	for i := range c.marks.tables {
		if v, ok := c.readWatch(i, now); ok {
			idx[i] = v
			continue
		}
		// Not watched: asked for now (the probes at once; each index on
		// its own says whether its table changed, so their order does
		// not matter), then watched from there.
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.marks.probes.Add(1)
			if idx[i], errs[i] = c.tableProbe(i, *indexOnly(tableQuery(ctx, i))); errs[i] != nil {
				errs[i] = fmt.Errorf("read Nomad's %s index: %w", markTables[i], errs[i])
				return
			}
			if !c.marks.probeOnly {
				c.arm(i, idx[i], now)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return "", err
	}
	return fmt.Sprintf("nodes=%d jobs=%d allocs=%d writes=%d events=%d", idx[0], idx[1], idx[2], c.marks.writes.Load(), c.marks.events.Load()), nil
}

// SetMarkWatches(false) makes ChangeMark ask Nomad for every index each
// time, as before the watches: for measuring the difference (e2e/nodesim
// TestScalePhilly). Set it before the first mark.
func (c *Client) SetMarkWatches(on bool) { c.marks.probeOnly = !on }

// MarkProbes is how many table indexes ChangeMark has asked Nomad for
// itself (not through a watch).
func (c *Client) MarkProbes() int64 { return c.marks.probes.Load() }

// readWatch is table i's index as its watch saw it; ok false when it is
// not watched. A table the watch saw move is watched again from there.
func (c *Client) readWatch(i int, now time.Time) (uint64, bool) {
	w := &c.marks.tables[i]
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return 0, false
	}
	w.lastRead = now
	if w.moved > w.base {
		w.base, w.moved = w.moved, 0
		w.gen++
		go c.watch(i, w.base, w.gen)
	}
	return w.base, true
}

// arm starts watching table i above index (unless a watch already
// follows it from as far).
func (c *Client) arm(i int, index uint64, now time.Time) {
	w := &c.marks.tables[i]
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastRead = now
	if w.armed && w.base >= index {
		return
	}
	w.armed, w.base, w.moved = true, index, 0
	w.gen++
	go c.watch(i, index, w.gen)
}

// watch waits on Nomad for table i to move above base, and notes where it
// went; it ends then, on an error (the table is then not watched), when
// its table was re-armed, or when no mark read it for markIdle.
func (c *Client) watch(i int, base, gen uint64) {
	w := &c.marks.tables[i]
	wait, idle := c.marks.wait, c.marks.idle
	if wait == 0 {
		wait, idle = markWait, markIdle
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wait+wait/2)
		q := tableQuery(ctx, i)
		// Nomad answers a query at index 0 at once (not blocking), and
		// a table no write touched yet has index 0; its first write
		// gives it that write's Raft index, never below 2, so waiting
		// above 1 sees it.
		q.WaitIndex, q.WaitTime = max(base, 1), wait
		began := time.Now()
		index, err := c.tableProbe(i, *indexOnly(q))
		cancel()
		if err == nil && index == base && time.Since(began) < wait/2 {
			// Answered at once with nothing new: whatever answers does
			// not block (not Nomad, or a proxy), so a watch would spin.
			err = errors.New("the query did not block")
		}
		w.mu.Lock()
		switch {
		case w.gen != gen:
		case err != nil:
			w.armed = false
			c.log.Debug("watching a table's index failed; the next round asks for it", "table", markTables[i], "error", err)
		case index > base:
			w.moved = index
		case index < base:
			// Gone down (a server restored from a snapshot): not a
			// watch's to follow; the next mark asks for it.
			w.armed = false
		case time.Since(w.lastRead) > idle:
			w.armed = false
		default:
			w.mu.Unlock()
			continue // waited the whole wait: watch on
		}
		w.mu.Unlock()
		return
	}
}

// wrote counts one of the client's own writes to Nomad into the mark.
func (c *Client) wrote() { c.marks.writes.Add(1) }

// markTopics are the event topics of the tables the mark follows
// (markTables); evaluations' events move none of them.
var markTopics = map[api.Topic]bool{api.TopicNode: true, api.TopicJob: true, api.TopicAllocation: true}

// sawEvents counts an event stream batch's writes to the mark's tables
// into the mark: their highest index, when above what it holds.
func (c *Client) sawEvents(evs []api.Event) {
	var top uint64
	for _, e := range evs {
		if markTopics[e.Topic] && e.Index > top {
			top = e.Index
		}
	}
	for {
		was := c.marks.events.Load()
		if top <= was || c.marks.events.CompareAndSwap(was, top) {
			return
		}
	}
}
