package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes lists the API's endpoints (docs/api.md).
func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /v1/nodes", s.leaderOnly(s.nodes))
	m.Handle("GET /v1/queue", s.leaderOnly(s.queue))
	m.Handle("GET /v1/leases", s.leaderOnly(s.leases))
	m.Handle("GET /v1/apps", s.leaderOnly(s.apps))
	m.Handle("GET /v1/decisions", s.leaderOnly(s.decisions))
	m.Handle("GET /v1/jobs", s.leaderOnly(s.jobs))
	m.Handle("GET /v1/jobs/", s.leaderOnly(s.job))
	m.HandleFunc("GET /v1/planner", s.planner)
	m.Handle("GET /ui/", uiHandler())
	m.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusFound))
	m.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	m.Handle("GET /metrics", s.everyNamespace(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+" (see docs/api.md)")
	})
	s.mux = m
}

// everyNamespace serves h to callers that read every namespace (its
// answer names jobs of all of them): with Options.Auth, a token that
// reads every namespace (a management token).
func (s *Server) everyNamespace(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc, ok := s.scopeOf(w, r)
		if !ok {
			return
		}
		if !sc.All {
			writeError(w, http.StatusForbidden, "this endpoint names jobs of every namespace: it needs a Nomad ACL token that reads them all (a management token)")
			return
		}
		h.ServeHTTP(w, r)
	}
}
