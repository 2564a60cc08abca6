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
	m.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+" (see docs/api.md)")
	})
	s.mux = m
}
