package httpapi

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
)

// docs are the endpoints' documents for one view, built once when it is
// published and never changed after.
type docs struct {
	nodes  NodesResponse
	queue  QueueResponse
	leases LeasesResponse
	apps   AppsResponse
	jobs   map[core.JobKey]*Job
	list   JobsResponse
	// digest tells whether a new view changes anything served.
	digest [sha256.Size]byte
}

func emptyDocs() *docs {
	d := &docs{nodes: NodesResponse{Nodes: []Node{}}, queue: QueueResponse{VCs: []VCQueue{}},
		leases: LeasesResponse{Leases: []Lease{}}, apps: AppsResponse{Apps: []App{}}, jobs: map[core.JobKey]*Job{}, list: JobsResponse{Jobs: []*Job{}}}
	d.digest = d.sum()
	return d
}

func buildDocs(v planner.View) *docs {
	d := &docs{
		nodes:  buildNodes(v),
		queue:  buildQueue(v),
		leases: buildLeases(v),
		apps:   buildApps(v),
	}
	d.jobs, d.list = buildJobs(v, d)
	d.digest = d.sum()
	return d
}

func (d *docs) sum() [sha256.Size]byte {
	b, _ := json.Marshal([]any{d.nodes, d.queue, d.leases, d.apps, d.list})
	return sha256.Sum256(b)
}

// jobName is a job's "<namespace>/<id>".
func jobName(k core.JobKey) string { return k.String() }
