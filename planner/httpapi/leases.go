package httpapi

import (
	"net/http"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/lease"
)

// LeasesResponse is /v1/leases: every lease in Consul after the last round.
type LeasesResponse struct {
	Leases []Lease `json:"leases"`
}

// Lease is a job's lease as Consul holds it (lease.JobLease's fields, with
// revoke while it is taken back), plus its job's name and state.
type Lease struct {
	Job string `json:"job"`
	// State is granted (its job's state in the other views; it read
	// "active" before), or revoking (the job checkpoints and stops; its GPUs
	// stay leased until its allocation ends, at Revoke.Deadline at the
	// latest).
	State string `json:"state"`
	lease.JobLease
}

// Lease states: those of the job holding the lease (states.go).
const (
	LeaseGranted  = "granted"
	LeaseRevoking = "revoking"
	// LeaseActive is LeaseGranted's old name.
	//
	// Deprecated: the state reads "granted", as its job's does.
	LeaseActive = LeaseGranted
)

func buildLeases(v planner.View) LeasesResponse {
	out := LeasesResponse{Leases: []Lease{}}
	for _, l := range v.Leases {
		out.Leases = append(out.Leases, leaseOf(l))
	}
	return out
}

func leaseOf(l lease.JobLease) Lease {
	x := Lease{Job: l.Namespace + "/" + l.JobID, State: LeaseGranted, JobLease: l}
	if l.Revoke != nil {
		x.State = LeaseRevoking
	}
	return x
}

func (s *Server) leases(_ *http.Request, sn snapshot) (any, int) { return sn.doc.leases, http.StatusOK }

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
