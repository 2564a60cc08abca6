package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// query is a request's blocking-query parameters.
type query struct {
	// blocking is set when the request named ?index=.
	blocking bool
	index    uint64
	wait     time.Duration
}

// parseQuery reads ?index=N and ?wait=D (a Go duration, or seconds as a
// bare number, as Nomad accepts).
func parseQuery(r *http.Request, def, max time.Duration) (query, error) {
	q := query{wait: def}
	v := r.URL.Query()
	if s := v.Get("index"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("index: want a whole number, got %q", s)
		}
		q.blocking, q.index = true, n
	}
	if s := v.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			n, nerr := strconv.ParseUint(s, 10, 64)
			if nerr != nil {
				return q, fmt.Errorf("wait: want a duration such as 30s, got %q", s)
			}
			d = time.Duration(n) * time.Second
		}
		if d < 0 {
			return q, fmt.Errorf("wait: must not be negative, got %q", s)
		}
		q.wait = d
	}
	q.wait = min(q.wait, max)
	return q, nil
}

// block returns the view to answer with: at once for a request that names
// no index, otherwise once the index exceeds the one named, leadership
// changes, the wait passes or the client goes away (then with what is
// current, as Nomad does).
func (s *Server) block(ctx context.Context, q query) snapshot {
	s.mu.Lock()
	leading, ch := s.leading, s.changed
	ready := !q.blocking || s.index > q.index || !leading
	s.mu.Unlock()
	if ready {
		return s.snapshot()
	}
	timer := time.NewTimer(q.wait)
	defer timer.Stop()
	for {
		select {
		case <-ch:
		case <-timer.C:
			return s.snapshot()
		case <-ctx.Done():
			return s.snapshot()
		}
		s.mu.Lock()
		ready = s.index > q.index || s.leading != leading
		ch = s.changed
		s.mu.Unlock()
		if ready {
			return s.snapshot()
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
