package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/themis-nomad/themis/planner"
)

// IndexHeader carries the index of the view a response was built from.
const IndexHeader = "X-Themis-Index"

// DefaultAddr is the planner's default API address.
const DefaultAddr = "127.0.0.1:4680"

// Options configure a Server.
type Options struct {
	// ID is this planner's identity (its -id), API its API's base URL, as
	// /v1/planner reports them.
	ID, API string
	// Version is the planner's build (themis version's line), as
	// /v1/planner reports it.
	Version string
	// Leader reads who holds the leader lock, for a standby's answer; nil
	// means unknown.
	Leader func(ctx context.Context) (Leader, error)
	// Decisions is how many recent decisions /v1/decisions keeps (default
	// 1000).
	Decisions int
	// MaxWait caps a blocking query's wait (default 10m); DefaultWait is
	// the wait of one that names none (default 5m).
	MaxWait, DefaultWait time.Duration
	// Auth resolves callers' Nomad ACL tokens to the namespaces they may
	// read (scope.go); nil: every caller reads everything.
	Auth Authorizer
}

// Leader names the planner that holds the leader lock.
type Leader struct {
	ID  string `json:"id"`
	API string `json:"api,omitempty"`
}

// Server serves the API. Its zero value is not usable: call New.
type Server struct {
	opts    Options
	metrics *metrics
	mux     *http.ServeMux

	mu      sync.Mutex
	leading bool
	index   uint64
	doc     *docs
	// changed is closed, and replaced, whenever index moves or
	// leadership changes: blocking queries wait on it.
	changed chan struct{}
	ring    *ring
	round   roundInfo
	// view is the last decided view, for scoped callers' documents,
	// built once per index and scope (scopedDocs, at scopedAt).
	view       *planner.View
	scopedAt   uint64
	scopedDocs map[string]*docs
}

// New returns a server; it serves nothing until the planner leads
// (SetLeading) and publishes a round (Publish).
func New(o Options) *Server {
	if o.Decisions <= 0 {
		o.Decisions = 1000
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 10 * time.Minute
	}
	if o.DefaultWait <= 0 {
		o.DefaultWait = 5 * time.Minute
	}
	s := &Server{opts: o, changed: make(chan struct{}), ring: newRing(o.Decisions), metrics: newMetrics()}
	s.doc = emptyDocs()
	s.routes()
	return s
}

// Handler is the API's HTTP handler (/v1/..., /metrics).
func (s *Server) Handler() http.Handler { return s.mux }

// SetLeading says whether this planner leads. Either way the view served so
// far is dropped (a new term starts from its first round), and blocking
// queries return.
func (s *Server) SetLeading(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leading == on {
		return
	}
	s.leading = on
	s.doc, s.view = emptyDocs(), nil
	s.round = roundInfo{}
	s.metrics.leading(on)
	s.bump()
}

// Publish takes a round's view (planner.Config.OnRound). A round that failed
// before deciding keeps the last view and only counts its error.
func (s *Server) Publish(v planner.View) {
	s.metrics.round(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.round = roundInfo{Time: v.Time.UTC(), DurationMS: float64(v.Duration.Microseconds()) / 1000, Skipped: v.Skipped}
	if v.Err != nil {
		s.round.Error = v.Err.Error()
	}
	changed := len(v.Events) > 0
	for _, e := range v.Events {
		s.ring.add(decisionOf(e))
	}
	if v.Decided {
		s.view = &v
		d := buildDocs(v)
		if d.digest != s.doc.digest {
			changed = true
		}
		s.doc = d
		s.metrics.view(v)
	}
	if changed {
		s.bump()
	}
}

// bump moves the index on and wakes blocking queries; s.mu is held.
func (s *Server) bump() {
	s.index++
	s.metrics.index.Set(float64(s.index))
	close(s.changed)
	s.changed = make(chan struct{})
}

// Index is the index of the view served now.
func (s *Server) Index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

// snapshot is what one request reads, under the lock.
type snapshot struct {
	leading   bool
	index     uint64
	doc       *docs
	view      *planner.View
	decisions []Decision
	round     roundInfo
}

func (s *Server) snapshot() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot{leading: s.leading, index: s.index, doc: s.doc, view: s.view, decisions: s.ring.list(), round: s.round}
}

// leaderOnly wraps an endpoint that serves the view: it answers the
// blocking query's wait, a standby's 503, and writes the index header.
func (s *Server) leaderOnly(body func(r *http.Request, sn snapshot) (any, int)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "the API is read-only: use GET")
			return
		}
		q, err := parseQuery(r, s.opts.DefaultWait, s.opts.MaxWait)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		sc, ok := s.scopeOf(w, r)
		if !ok {
			return
		}
		sn := s.block(r.Context(), q)
		if !sn.leading {
			s.standby(w, r)
			return
		}
		sn = s.scoped(sn, sc)
		v, code := body(r, sn)
		w.Header().Set(IndexHeader, itoa(sn.index))
		writeJSON(w, code, v)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
	// Leader is who leads, in a standby's answer (nil: unknown).
	Leader *Leader `json:"leader,omitempty"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, Error{Error: msg})
}
