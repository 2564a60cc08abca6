package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/spec"
)

// Multi-node gangs. A gang larger than a node runs as one task group with
// one allocation per node (the planner's pin); each allocation's task is
// one part of the gang, on the GPUs of its part of the lease. Before it
// starts the workload, the driver of each part:
//
//  1. finds its rank: the position, in the lease's parts, of the part
//     whose GPUs Nomad gave the task;
//  2. joins the gang's rendezvous in Consul: writes its member key
//     (lease.GangKey: rank, node, address; rank 0 also a free port for the
//     workload's own rendezvous, torch.distributed's MASTER_PORT);
//  3. waits until every rank has joined, so that no part trains while
//     another is missing (all-or-nothing). It gives up, failing the task,
//     when the lease is taken back meanwhile (the planner found the gang
//     broken or incomplete) or after gang_timeout;
//  4. starts the workload with the gang's environment (gangEnv).

// Gang environment of a task (docs/gangs.md).
const (
	EnvGangSize    = "THEMIS_GANG_SIZE"
	EnvGangRank    = "THEMIS_GANG_RANK"
	EnvGangPeers   = "THEMIS_GANG_PEERS"
	EnvGPUsPerNode = "THEMIS_GPUS_PER_NODE"
	EnvMasterAddr  = "MASTER_ADDR"
	EnvMasterPort  = "MASTER_PORT"
)

// DefaultGangTimeout is how long a gang's part waits for the others.
const DefaultGangTimeout = 5 * time.Minute

// GangRendezvous is where a gang's parts meet; ConsulLeases implements it.
type GangRendezvous interface {
	// JoinGang writes one member's key.
	JoinGang(ctx context.Context, namespace, jobID, leaseID string, m lease.GangMember) error
	// GangMembers lists the members that joined, blocking until the
	// folder's index passes waitIndex (or a short wait ends); it returns
	// the index to wait on next.
	GangMembers(ctx context.Context, namespace, jobID, leaseID string, waitIndex uint64) ([]lease.GangMember, uint64, error)
}

// gangPart is one task's place in its gang.
type gangPart struct {
	lease lease.JobLease
	rank  int
}

func (g gangPart) size() int { return len(g.lease.Parts) }

// findPart returns the task's part of its job's lease when that lease is a
// multi-node gang's and ids are exactly one part's GPUs; ok is false for a
// one-node lease.
func findPart(ctx context.Context, r LeaseReader, cfg *drivers.TaskConfig, ids []string) (gangPart, bool, error) {
	l, err := r.JobLease(ctx, cfg.Namespace, cfg.JobID)
	if err != nil {
		return gangPart{}, false, err
	}
	if l == nil || len(l.Parts) == 0 {
		return gangPart{}, false, nil
	}
	rank := l.Rank(ids)
	if rank < 0 {
		return gangPart{}, false, fmt.Errorf("task %q of job %q: Nomad allocated themis GPUs %v, which are no part of the gang's lease %s (%s): %w",
			cfg.Name, cfg.JobID, ids, l.LeaseID, l.NodeNames(), ErrNoGrant)
	}
	return gangPart{lease: *l, rank: rank}, true, nil
}

// rendezvous joins the gang and waits for every rank; it returns the
// members by rank and, for rank 0, its MASTER_PORT held (masterport.go),
// which the caller releases just before the workload starts.
func rendezvous(ctx context.Context, r LeaseReader, g GangRendezvous, cfg *drivers.TaskConfig, part gangPart, addr string, timeout time.Duration, uid int) (members []lease.GangMember, held *masterPort, err error) {
	ns, job, id := cfg.Namespace, cfg.JobID, part.lease.LeaseID
	me := lease.GangMember{Rank: part.rank, AllocID: cfg.AllocID, NodeID: part.lease.Parts[part.rank].NodeID, Addr: addr, Joined: time.Now().UTC()}
	if part.rank == 0 {
		me.UID = uid // the gang's identity (identity.go)
		var port int
		held, port, err = holdPort(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("gang rank 0: pick a port for the workload's rendezvous on %s: %w", addr, err)
		}
		defer func() {
			if err != nil {
				held.release()
			}
		}()
		me.Port = port
	}
	members, err = gatherMembers(ctx, r, g, ns, job, id, part, me, timeout)
	return members, held, err
}

// gatherMembers writes me and waits until every rank has joined.
func gatherMembers(ctx context.Context, r LeaseReader, g GangRendezvous, ns, job, id string, part gangPart, me lease.GangMember, timeout time.Duration) ([]lease.GangMember, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := g.JoinGang(ctx, ns, job, id, me); err != nil {
		return nil, fmt.Errorf("gang rendezvous: %w", err)
	}
	var index uint64
	joined := 1
	for {
		members, next, err := g.GangMembers(ctx, ns, job, id, index)
		if err == nil {
			if byRank, ok := complete(members, part.size()); ok {
				if err := checkAddrs(part.lease, byRank); err != nil {
					return nil, err
				}
				return byRank, nil
			}
			index, joined = next, len(members)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("gang rendezvous: %d of %d parts joined within %s (gang_timeout)", joined, part.size(), timeout)
		}
		// Stop waiting for a gang the planner took back.
		l, lerr := r.JobLease(ctx, ns, job)
		switch {
		case lerr != nil:
		case l == nil || l.LeaseID != id:
			return nil, fmt.Errorf("gang rendezvous: lease %s of the gang was released while its parts gathered", id)
		case l.Revoke != nil:
			return nil, fmt.Errorf("gang rendezvous: the planner is taking the gang back: %s", l.Revoke.Reason)
		}
		if err != nil {
			select { // Consul unreachable: retry shortly
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// complete returns the members by rank when every rank of size joined.
func complete(members []lease.GangMember, size int) ([]lease.GangMember, bool) {
	byRank := make([]lease.GangMember, size)
	seen := 0
	for _, m := range members {
		if m.Rank >= 0 && m.Rank < size && byRank[m.Rank].Addr == "" {
			byRank[m.Rank] = m
			seen++
		}
	}
	return byRank, seen == size
}

// checkAddrs fails when a rank's record names another address than the
// one the planner wrote for its part in the lease (its node's
// fingerprinted gang address; a part without one is not checked, as
// leases of planners before it).
func checkAddrs(l lease.JobLease, byRank []lease.GangMember) error {
	for i, m := range byRank {
		if i < len(l.Parts) && l.Parts[i].Addr != "" && m.Addr != l.Parts[i].Addr {
			return fmt.Errorf("gang rendezvous: rank %d's record names address %s, not %s, the address node %s published (lease %s): a record not its node's driver wrote; refusing to gather",
				i, m.Addr, l.Parts[i].Addr, l.Parts[i].NodeName, l.LeaseID)
		}
	}
	return nil
}

// gangEnv is a gang part's environment: its rank, the gang's size, the
// peers' addresses by rank, and rank 0's address and port as
// torch.distributed's MASTER_ADDR and MASTER_PORT.
func gangEnv(part gangPart, members []lease.GangMember) map[string]string {
	peers := make([]string, len(members))
	for i, m := range members {
		peers[i] = m.Addr
	}
	return map[string]string{
		EnvGangSize:    strconv.Itoa(part.size()),
		EnvGangRank:    strconv.Itoa(part.rank),
		EnvGangPeers:   strings.Join(peers, ","),
		EnvGPUsPerNode: strconv.Itoa(len(part.lease.Parts[part.rank].GPUs)),
		EnvMasterAddr:  members[0].Addr,
		EnvMasterPort:  strconv.Itoa(members[0].Port),
	}
}

// soloEnv is the gang environment of a one-node job: a gang of one.
func soloEnv(in spec.Intent) map[string]string {
	return map[string]string{EnvGangSize: "1", EnvGangRank: "0", EnvGPUsPerNode: strconv.Itoa(in.GPUs)}
}

// defaultAdvertise is the address other nodes reach this one at: the
// source address of the route to a public address (no packet is sent),
// else loopback.
func defaultAdvertise() string {
	c, err := net.Dial("udp", "192.0.2.1:9")
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// JoinGang implements GangRendezvous.
func (c *ConsulLeases) JoinGang(ctx context.Context, namespace, jobID, leaseID string, m lease.GangMember) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	key := lease.GangKey(namespace, jobID, leaseID, m.Rank)
	if _, err := c.kv.Put(&api.KVPair{Key: key, Value: v}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return driverDenied(fmt.Errorf("write %s: %w", key, err), "write "+key, key, "write")
	}
	return nil
}

// GangMembers implements GangRendezvous with a blocking query of up to 2 s.
func (c *ConsulLeases) GangMembers(ctx context.Context, namespace, jobID, leaseID string, waitIndex uint64) ([]lease.GangMember, uint64, error) {
	prefix := lease.GangPrefix(namespace, jobID, leaseID)
	pairs, meta, err := c.kv.List(prefix, (&api.QueryOptions{WaitIndex: waitIndex, WaitTime: 2 * time.Second}).WithContext(ctx))
	if err != nil {
		return nil, waitIndex, driverDenied(fmt.Errorf("list %s: %w", prefix, err), "list "+prefix, prefix, "write")
	}
	var out []lease.GangMember
	for _, p := range pairs {
		var m lease.GangMember
		if err := json.Unmarshal(p.Value, &m); err != nil {
			return nil, waitIndex, fmt.Errorf("decode %s: %w", p.Key, err)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Rank < out[b].Rank })
	return out, meta.LastIndex, nil
}

var errNoRendezvous = errors.New("the lease reader cannot gather a gang (no GangRendezvous)")
