package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/arbiter"
)

// AppsResponse is /v1/apps: the last auction round, per app (Themis). With
// a policy that runs no auction, or before the first round of this
// planner's stack, round is 0 and apps is empty.
type AppsResponse struct {
	Policy string `json:"policy"`
	// Round is the arbiter's round counter, At when that round ran (not
	// necessarily the planner's last round: the arbiter auctions only when
	// a lease ends or GPUs free up), OfferGPUs the GPUs it offered.
	Round     uint64 `json:"round"`
	At        string `json:"at,omitempty"`
	OfferGPUs int    `json:"offer_gpus"`
	Apps      []App  `json:"apps"`
}

// App is one app's part in the round: arbiter.AppReport's fields (rho,
// bid, won, rho_after, placed, c, lease_s) and when the lease it won ends.
type App struct {
	arbiter.AppReport
	LeaseEnds string `json:"lease_ends,omitempty"`
}

func buildApps(v planner.View) AppsResponse { return AppsFromRound(v.Policy, v.Auction) }

// AppsFromRound is /v1/apps for the auction round rep (nil: none yet) of
// policy; themis apps builds it the same way from the round Consul keeps.
func AppsFromRound(policy string, rep *arbiter.RoundReport) AppsResponse {
	out := AppsResponse{Policy: policy, Apps: []App{}}
	if rep == nil {
		return out
	}
	out.Round, out.At, out.OfferGPUs = rep.Round, rfc3339(rep.At), rep.Offer
	for _, a := range rep.Apps {
		x := App{AppReport: a}
		if a.Won > 0 && a.Lease > 0 {
			x.LeaseEnds = rfc3339(rep.At.Add(time.Duration(a.Lease * float64(time.Second))))
		}
		out.Apps = append(out.Apps, x)
	}
	return out
}

// AppIs reports whether the app the auction names scoped (a
// "<namespace>:<app>", nomad.ScopedApp) is name: that, or its app part
// (the app of that name in every namespace shown).
func AppIs(scoped, name string) bool {
	if scoped == name {
		return true
	}
	_, app, ok := strings.Cut(scoped, ":")
	return ok && app == name
}

// apps serves /v1/apps; ?app=NAME keeps one app (NAME or NS:NAME).
func (s *Server) apps(r *http.Request, sn snapshot) (any, int) {
	name, ok := r.URL.Query()["app"]
	if !ok {
		return sn.doc.apps, http.StatusOK
	}
	out := sn.doc.apps
	out.Apps = []App{}
	for _, a := range sn.doc.apps.Apps {
		if AppIs(a.App, name[0]) {
			out.Apps = append(out.Apps, a)
		}
	}
	return out, http.StatusOK
}
