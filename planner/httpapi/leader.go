package httpapi

import (
	"context"
	"net/http"
	"time"
)

// LeaderHeader, in a standby's answer, is the leading planner's API
// address when it is known.
const LeaderHeader = "X-Themis-Leader"

// PlannerResponse is /v1/planner, which every planner serves, leader or
// not: who it is, whether it leads, who does, and its last round.
type PlannerResponse struct {
	ID  string `json:"id"`
	API string `json:"api,omitempty"`
	// Version is the planner's build, as themis version prints it.
	Version string  `json:"version,omitempty"`
	Leading bool    `json:"leading"`
	Leader  *Leader `json:"leader,omitempty"`
	// Index is the index of the view it serves.
	Index uint64 `json:"index"`
	// Round is its last round (zero while it has not run one).
	Round roundInfo `json:"round"`
}

// roundInfo describes the last round.
type roundInfo struct {
	Time       time.Time `json:"time,omitzero"`
	DurationMS float64   `json:"duration_ms"`
	Error      string    `json:"error,omitempty"`
	// Skipped: nothing had changed since the last round, whose decision
	// stands (the view served is that round's).
	Skipped bool `json:"skipped,omitempty"`
}

// leader reads who leads; a planner that leads names itself.
func (s *Server) leader(ctx context.Context, leading bool) *Leader {
	if leading {
		return &Leader{ID: s.opts.ID, API: s.opts.API}
	}
	if s.opts.Leader == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := s.opts.Leader(ctx)
	if err != nil || l.ID == "" {
		return nil
	}
	return &l
}

// standby answers a request for the view on a planner that does not lead:
// 503, naming the leader (and its API in the X-Themis-Leader header) so
// that a client can ask it instead.
func (s *Server) standby(w http.ResponseWriter, r *http.Request) {
	l := s.leader(r.Context(), false)
	msg := "this planner is a standby: only the leading planner serves the API"
	if l == nil {
		msg += " (no planner leads now)"
	} else {
		msg += "; " + l.ID + " leads"
		if l.API != "" {
			w.Header().Set(LeaderHeader, l.API)
			msg += " at " + l.API
		}
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, Error{Error: msg, Leader: l})
}

// planner serves /v1/planner.
func (s *Server) planner(w http.ResponseWriter, r *http.Request) {
	sn := s.snapshot()
	w.Header().Set(IndexHeader, itoa(sn.index))
	writeJSON(w, http.StatusOK, PlannerResponse{ID: s.opts.ID, API: s.opts.API, Version: s.opts.Version, Leading: sn.leading,
		Leader: s.leader(r.Context(), sn.leading), Index: sn.index, Round: sn.round})
}
