package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner"
)

func httptestServer(t *testing.T, s *Server) *httptest.Server {
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func indexOf(t *testing.T, h http.Header) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(h.Get(IndexHeader), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q", IndexHeader, h.Get(IndexHeader))
	}
	return n
}

// Blocking queries: a request naming the current index waits until a
// round changes the view (not for a round that changes nothing), or until
// its wait passes; one naming an older index, or none, answers at once.
func TestBlockingQuery(t *testing.T) {
	cases := []struct {
		name string
		// publish, after 50ms, what the next round leaves (nil: nothing).
		publish func(planner.View) *planner.View
		query   string // after ?index=<current>
		// want: the answer came after the change (a higher index), or
		// after the wait with the same index.
		changed  bool
		minTook  time.Duration
		maxTook  time.Duration
		oldIndex bool // ask with the index before the current one
	}{
		{"a job queued wakes it", func(v planner.View) *planner.View {
			v.Queue = append(v.Queue, planner.Queued{Job: key("e"), Position: 3, GPUs: 1, State: "queued", Reason: "waiting"})
			return &v
		}, "&wait=5s", true, 40 * time.Millisecond, 3 * time.Second, false},
		{"a round that changes nothing does not", func(v planner.View) *planner.View {
			v.Events, v.Time = nil, v.Time.Add(time.Second)
			return &v
		}, "&wait=300ms", false, 250 * time.Millisecond, 3 * time.Second, false},
		{"a failed round does not", func(v planner.View) *planner.View {
			return &planner.View{Time: v.Time, Err: errTest}
		}, "&wait=300ms", false, 250 * time.Millisecond, 3 * time.Second, false},
		{"the wait passes", nil, "&wait=200ms", false, 150 * time.Millisecond, 3 * time.Second, false},
		{"wait in seconds", nil, "&wait=1", false, 900 * time.Millisecond, 3 * time.Second, false},
		{"an older index answers at once", nil, "&wait=5s", false, 0, time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := fixture()
			s, ts := leader(t, v)
			idx := s.Index()
			ask := idx
			if tc.oldIndex {
				ask = idx - 1
			}
			if tc.publish != nil {
				next := tc.publish(v)
				time.AfterFunc(50*time.Millisecond, func() { s.Publish(*next) })
			}
			start := time.Now()
			code, h, body := get(t, ts, "/v1/queue?index="+strconv.FormatUint(ask, 10)+tc.query)
			took := time.Since(start)
			if code != 200 {
				t.Fatalf("%d %v", code, body)
			}
			got := indexOf(t, h)
			if tc.changed != (got > idx) {
				t.Errorf("index %d after %d: changed %v, want %v", got, idx, got > idx, tc.changed)
			}
			if took < tc.minTook || took > tc.maxTook {
				t.Errorf("took %s, want %s to %s", took, tc.minTook, tc.maxTook)
			}
			if tc.changed && len(at(t, body, "vcs", 0, "jobs").([]any)) != 3 {
				t.Errorf("the answer is not the new view: %v", body)
			}
		})
	}
}

// Before the first round the index is that of SetLeading, and ?index=
// of it waits for the first round.
func TestBlockingQueryWaitsForTheFirstRound(t *testing.T) {
	s, ts := leader(t)
	idx := s.Index()
	time.AfterFunc(50*time.Millisecond, func() { s.Publish(fixture()) })
	code, h, body := get(t, ts, "/v1/leases?wait=5s&index="+strconv.FormatUint(idx, 10))
	if code != 200 || indexOf(t, h) <= idx || len(at(t, body, "leases").([]any)) != 2 {
		t.Fatalf("%d %v %v", code, h, body)
	}
}

// A blocked query on a planner that loses leadership answers as a standby.
func TestBlockingQueryLosesLeadership(t *testing.T) {
	s, ts := leader(t, fixture())
	time.AfterFunc(50*time.Millisecond, func() { s.SetLeading(false) })
	code, _, body := get(t, ts, "/v1/nodes?wait=5s&index="+strconv.FormatUint(s.Index(), 10))
	if code != http.StatusServiceUnavailable {
		t.Fatalf("%d %v, want 503", code, body)
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("consul: connection refused")
