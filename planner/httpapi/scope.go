package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
)

// Who may read what (docs/api.md, "Access"). With Options.Auth set, every
// request to /v1/... names a Nomad ACL token (X-Nomad-Token, or
// "Authorization: Bearer"; none is Nomad's anonymous token), which the
// Authorizer resolves to the namespaces the token can read; the caller
// sees only their jobs, leases, queue entries, apps and decisions, and
// nodes with only their jobs. /metrics (per-job series) needs a token that
// reads every namespace (a management token). /v1/planner and the
// dashboard's files carry nothing of a tenant's.

// Scope is what a caller may read: every namespace, or those named.
type Scope struct {
	All        bool
	Namespaces map[string]bool
}

// Sees reports whether the scope reads namespace ns.
func (sc Scope) Sees(ns string) bool { return sc.All || sc.Namespaces[ns] }

// key names the scope for the cache of scoped documents.
func (sc Scope) key() string {
	if sc.All {
		return "*"
	}
	ns := make([]string, 0, len(sc.Namespaces))
	for n := range sc.Namespaces {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return strings.Join(ns, "\x00")
}

// Authorizer resolves a caller's Nomad ACL token ("" for none) to what it
// may read; an error refuses the request (its text is the answer's).
type Authorizer interface {
	Scope(ctx context.Context, token string) (Scope, error)
}

// tokenOf is the Nomad ACL token a request carries ("" for none).
func tokenOf(r *http.Request) string {
	if t := r.Header.Get("X-Nomad-Token"); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimPrefix(a, "Bearer ")
	}
	return ""
}

// scopeOf resolves the request's scope: every namespace without an
// Authorizer, else the token's; ok is false when the request was refused
// (the answer is written).
func (s *Server) scopeOf(w http.ResponseWriter, r *http.Request) (Scope, bool) {
	if s.opts.Auth == nil {
		return Scope{All: true}, true
	}
	sc, err := s.opts.Auth.Scope(r.Context(), tokenOf(r))
	if err != nil {
		writeError(w, http.StatusForbidden, "the planner's API reads Nomad ACL tokens (X-Nomad-Token): "+err.Error())
		return Scope{}, false
	}
	return sc, true
}

// scoped is sn as a caller of scope sc sees it: the documents of the view
// without what other namespaces own (built once per view and scope), and
// the decisions about its jobs.
func (s *Server) scoped(sn snapshot, sc Scope) snapshot {
	if sc.All {
		return sn
	}
	s.mu.Lock()
	if s.scopedAt != sn.index {
		s.scopedAt, s.scopedDocs = sn.index, map[string]*docs{}
	}
	d, ok := s.scopedDocs[sc.key()]
	s.mu.Unlock()
	if !ok {
		d = emptyDocs()
		if sn.view != nil {
			d = buildDocs(scopeView(*sn.view, sc))
		}
		s.mu.Lock()
		if s.scopedAt == sn.index && len(s.scopedDocs) < 256 {
			s.scopedDocs[sc.key()] = d
		}
		s.mu.Unlock()
	}
	sn.doc = d
	var ds []Decision
	for _, x := range sn.decisions {
		if ns, _, _ := strings.Cut(x.Job, "/"); sc.Sees(ns) {
			ds = append(ds, x)
		}
	}
	sn.decisions = ds
	return sn
}

// scopeView is v without the jobs, leases, queue entries, events and apps
// of namespaces sc does not read, and without their jobs in the cells.
func scopeView(v planner.View, sc Scope) planner.View {
	sees := func(k core.JobKey) bool { return sc.Sees(k.Namespace) }
	v.Jobs = slices.DeleteFunc(slices.Clone(v.Jobs), func(j planner.JobView) bool { return !sees(j.Key) })
	v.Leases = slices.DeleteFunc(slices.Clone(v.Leases), func(l lease.JobLease) bool { return !sc.Sees(l.Namespace) })
	v.Queue = slices.DeleteFunc(slices.Clone(v.Queue), func(q planner.Queued) bool { return !sees(q.Job) })
	v.Events = slices.DeleteFunc(slices.Clone(v.Events), func(e planner.Event) bool { return !sees(e.Job) })
	if v.Auction != nil {
		rep := *v.Auction
		rep.Apps = slices.DeleteFunc(slices.Clone(rep.Apps), func(a core.AppReport) bool { return !sc.Sees(appNamespace(a.App)) })
		v.Auction = &rep
	}
	cell := func(c hived.CellView) hived.CellView {
		c.Jobs = slices.DeleteFunc(slices.Clone(c.Jobs), func(k core.JobKey) bool { return !sees(k) })
		return c
	}
	vcs := make([]planner.VCView, len(v.VCs))
	for i, vc := range v.VCs {
		vc.Cells = slices.Clone(vc.Cells)
		for j := range vc.Cells {
			vc.Cells[j] = cell(vc.Cells[j])
		}
		vcs[i] = vc
	}
	v.VCs = vcs
	if v.GPUCells != nil {
		gc := make(map[string]hived.CellView, len(v.GPUCells))
		for id, c := range v.GPUCells {
			gc[id] = cell(c)
		}
		v.GPUCells = gc
	}
	return v
}

// appNamespace is the namespace of an app as the auction names it:
// "<namespace>:<app>" (nomad.ScopedApp), or "<namespace>/<job>" for a job
// that is an app of its own.
func appNamespace(app string) string {
	if i := strings.IndexAny(app, ":/"); i >= 0 {
		return app[:i]
	}
	return ""
}
