package lease

import (
	"net/url"
	"strconv"
	"time"
)

const gangPrefix = Root + "gangs/"

// GangPrefix is where the members of one run of a multi-node gang meet:
// themis/gangs/<namespace>/<job>/<lease-id>/. The task driver of each part
// writes its member key there and starts its task only once every rank has
// written one (the gang's rendezvous); the planner deletes the folder with
// the lease.
func GangPrefix(namespace, jobID, leaseID string) string {
	return gangPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(jobID) + "/" + url.PathEscape(leaseID) + "/"
}

// GangKey is one rank's member key.
func GangKey(namespace, jobID, leaseID string, rank int) string {
	return GangPrefix(namespace, jobID, leaseID) + strconv.Itoa(rank)
}

// GangMember is what one part of a gang tells the others: where it runs
// and, for rank 0, the port its workload's rendezvous (torch.distributed's
// MASTER_PORT) listens on.
type GangMember struct {
	Rank    int    `json:"rank"`
	AllocID string `json:"alloc_id"`
	NodeID  string `json:"node_id"`
	Addr    string `json:"addr"`
	Port    int    `json:"port,omitempty"`
	// UID is, in rank 0's record, the uid the gang's tasks run as when
	// the drivers give them a dynamic uid (they share one checkpoint dir,
	// so one identity; driver/identity.go).
	UID    int       `json:"uid,omitempty"`
	Joined time.Time `json:"joined"`
}

// Rank is the position of the part holding gpus among the lease's parts,
// or -1 when no part holds exactly those GPUs.
func (j JobLease) Rank(gpus []string) int {
	for r, p := range j.Nodes() {
		if sameSet(p.GPUs, gpus) {
			return r
		}
	}
	return -1
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(a))
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}
