package policies

import (
	"fmt"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// The policies' tests decide through core.Scheduler over small clusters
// built here.

// node8 is a DGX-like node: 2 sockets x 2 PCIe switches x 1 NVLink pair of 2.
func node8(name string) core.Node {
	n := core.Node{ID: "id-" + name, Name: name, Schedulable: true}
	for i := range 8 {
		n.GPUs = append(n.GPUs, core.GPU{
			ID:      fmt.Sprintf("%s-%d", name, i),
			Index:   i,
			Path:    []string{fmt.Sprintf("socket%d", i/4), fmt.Sprintf("switch%d", i/2), fmt.Sprintf("pair%d", i/2)},
			Healthy: true,
		})
	}
	return n
}

// job is a job of the default namespace submitted at the given second.
func job(id string, gpus int, submitted int, phase core.Phase) core.Job {
	return core.Job{Key: core.JobKey{Namespace: "default", ID: id}, GPUs: gpus, Submitted: time.Unix(int64(submitted), 0), Phase: phase}
}

// grant is a grant to job id of the default namespace.
func grant(id, node string, gpus ...string) core.Grant {
	return core.Grant{Job: core.JobKey{Namespace: "default", ID: id}, Node: node, GPUs: gpus}
}

// nodeN is a node of n GPUs in rack, all in one cell.
func nodeN(name, rack string, n int) core.Node {
	nd := core.Node{ID: "id-" + name, Name: name, Rack: rack, Schedulable: true}
	for i := range n {
		nd.GPUs = append(nd.GPUs, core.GPU{ID: fmt.Sprintf("%s-%d", name, i), Index: i, Healthy: true})
	}
	return nd
}
