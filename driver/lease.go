package driver

import (
	"github.com/themis-nomad/themis/planner/aclhint"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/spec"
)

// Device identity of the GPUs the themis device plugin fingerprints.
const (
	GPUVendor = "themis"
	GPUType   = "gpu"
)

// consulTimeout bounds every Consul request the driver makes.
const consulTimeout = 5 * time.Second

// LeaseReader reads GPU leases. ConsulLeases is the implementation the
// driver uses; tests substitute a double.
type LeaseReader interface {
	// GPULeases returns the lease of each GPU that has one; a GPU without a
	// lease has no entry.
	GPULeases(ctx context.Context, gpuIDs []string) (map[string]*lease.GPULease, error)
	// JobLease returns the job's lease, or nil when it has none. StopTask
	// reads it, best effort, for the reason of a revoke (preemption).
	JobLease(ctx context.Context, namespace, jobID string) (*lease.JobLease, error)
	// Ping reports whether leases can be read at all.
	Ping(ctx context.Context) error
	CheckpointReporter
}

// ConsulLeases reads leases from Consul KV in the layout of planner/lease.
type ConsulLeases struct {
	kv     *api.KV
	status *api.Status
	addr   string
}

// NewConsulLeases returns a reader for the Consul agent at addr (host:port).
func NewConsulLeases(addr string) (*ConsulLeases, error) {
	return NewConsulLeasesToken(addr, "")
}

// NewConsulLeasesToken is NewConsulLeases with a Consul ACL token (empty:
// $CONSUL_HTTP_TOKEN, if set).
func NewConsulLeasesToken(addr, token string) (*ConsulLeases, error) {
	cfg := api.DefaultConfig()
	cfg.Address = addr
	if token != "" {
		cfg.Token = token
	}
	cfg.HttpClient = &http.Client{Timeout: consulTimeout}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("consul client for %q: %w", addr, err)
	}
	return &ConsulLeases{kv: c.KV(), status: c.Status(), addr: addr}, nil
}

// GPULeases implements LeaseReader.
func (c *ConsulLeases) GPULeases(ctx context.Context, gpuIDs []string) (map[string]*lease.GPULease, error) {
	out := make(map[string]*lease.GPULease, len(gpuIDs))
	for _, id := range gpuIDs {
		key := lease.GPUKey(id)
		pair, _, err := c.kv.Get(key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
		if err != nil {
			return nil, driverDenied(fmt.Errorf("read lease %s from consul at %s: %w", key, c.addr, err), "read "+key, key, "read")
		}
		if pair == nil {
			continue
		}
		var l lease.GPULease
		if err := json.Unmarshal(pair.Value, &l); err != nil {
			return nil, fmt.Errorf("decode lease %s: %w", key, err)
		}
		out[id] = &l
	}
	return out, nil
}

// JobLease implements LeaseReader. It reads with Consul's default
// consistency (the leader answers, without RequireConsistent's extra quorum
// round): the planner writes a revoke before it stops the job, well before
// the driver asks.
func (c *ConsulLeases) JobLease(ctx context.Context, namespace, jobID string) (*lease.JobLease, error) {
	key := lease.JobKey(namespace, jobID)
	pair, _, err := c.kv.Get(key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, driverDenied(fmt.Errorf("read lease %s from consul at %s: %w", key, c.addr, err), "read "+key, key, "read")
	}
	if pair == nil {
		return nil, nil
	}
	var l lease.JobLease
	if err := json.Unmarshal(pair.Value, &l); err != nil {
		return nil, fmt.Errorf("decode lease %s: %w", key, err)
	}
	return &l, nil
}

// Ping implements LeaseReader: Consul must answer and have a leader.
func (c *ConsulLeases) Ping(ctx context.Context) error {
	leader, err := c.status.LeaderWithQueryOptions((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("consul at %s: %w", c.addr, err)
	}
	if leader == "" {
		return fmt.Errorf("consul at %s has no leader", c.addr)
	}
	return nil
}

// ErrNoGrant is wrapped by the lease check when Nomad placed a task on a
// number of themis GPUs that differs from its stanza, which only happens
// when the task was placed without a planner grant.
var ErrNoGrant = errors.New("placed without a planner grant")

// allocatedGPUs lists the themis GPU instances Nomad allocated to the task.
//
// Nomad's driver protocol does not carry a task's device allocations
// (Resources.NomadResources.Devices arrives empty in an external driver), so
// the IDs come from the environment the themis device plugin's Reserve sets,
// which Nomad passes as TaskConfig.DeviceEnv (a task's own env cannot set
// it). Devices is still honoured when present (a driver run in-process).
func allocatedGPUs(cfg *drivers.TaskConfig) []string {
	seen := map[string]bool{}
	if cfg.Resources != nil && cfg.Resources.NomadResources != nil {
		for _, d := range cfg.Resources.NomadResources.Devices {
			if d == nil || d.Vendor != GPUVendor || d.Type != GPUType {
				continue
			}
			for _, id := range d.DeviceIDs {
				seen[id] = true
			}
		}
	}
	for _, id := range strings.Split(cfg.DeviceEnv[EnvGPUIDs], ",") {
		if id = strings.TrimSpace(id); id != "" {
			seen[id] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// checkLeases enforces invariant 1 for one task: it runs only on GPUs leased
// to its job, and on as many as its stanza asks for, or, for one part of a
// multi-node gang, on exactly its part's GPUs. It returns the task's part
// of a gang (ok false for a one-node job).
func checkLeases(ctx context.Context, r LeaseReader, cfg *drivers.TaskConfig, in spec.Intent) (part gangPart, gang bool, err error) {
	ids := allocatedGPUs(cfg)
	if len(ids) != in.GPUs {
		part, gang, err = findPart(ctx, r, cfg, ids)
		switch {
		case err != nil && errors.Is(err, ErrNoGrant):
			return gangPart{}, false, fmt.Errorf("lease check: %w", err)
		case err != nil:
			return gangPart{}, false, structs.NewRecoverableError(fmt.Errorf("lease check: %w", err), true)
		case !gang:
			return gangPart{}, false, fmt.Errorf("task %q of job %q: stanza asks for %d GPUs but Nomad allocated %d themis GPUs %v: %w",
				cfg.Name, cfg.JobID, in.GPUs, len(ids), ids, ErrNoGrant)
		}
	}
	leases, err := r.GPULeases(ctx, ids)
	if err != nil {
		// Transient (Consul down or slow): let Nomad's restart policy retry,
		// unlike a missing or foreign lease, which no retry can fix.
		return gangPart{}, false, structs.NewRecoverableError(fmt.Errorf("lease check: %w", err), true)
	}
	if err := lease.Verify(cfg.Namespace, cfg.JobID, ids, leases); err != nil {
		return gangPart{}, false, fmt.Errorf("lease check: %w", err)
	}
	return part, gang, nil
}

// CheckpointReporter publishes a task's newest complete checkpoint, so the
// planner can prefer victims that lose the least work. ConsulLeases writes
// it to Consul KV (the one write the driver makes there); tests substitute
// a double.
type CheckpointReporter interface {
	ReportCheckpoint(ctx context.Context, rec lease.CheckpointRecord) error
}

// ReportCheckpoint writes the job's checkpoint record (lease.CheckpointKey).
func (c *ConsulLeases) ReportCheckpoint(ctx context.Context, rec lease.CheckpointRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	key := lease.CheckpointKey(rec.Namespace, rec.JobID)
	if _, err := c.kv.Put(&api.KVPair{Key: key, Value: v}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return driverDenied(fmt.Errorf("write %s: %w", key, err), "write "+key, key, "write")
	}
	return nil
}

// driverDenied gives an ACL refusal of the driver's Consul call on key the
// rule of examples/acl/driver.consul.hcl it needs (the plugin's
// consul_token; docs/acl.md).
func driverDenied(err error, call, key, verb string) error {
	return aclhint.Wrap(err, "Consul", call, fmt.Sprintf("key_prefix %q { policy = %q }", aclhint.KeyPrefix(key), verb), "driver.consul.hcl")
}
