package device

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomaddevice "github.com/hashicorp/nomad/plugins/device"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
	"github.com/themis-nomad/themis/planner/lease"
)

// Checkpoint dirs of exec and docker themis tasks. A task of those drivers
// sees only its chroot or container and what is mounted into it, so it can
// be given its own job's checkpoint dir and nothing else: Reserve, which
// Nomad calls for every task given themis GPUs, looks up the job those
// GPUs are leased to (Consul, themis/leases/gpus/<id>) and mounts
//
//	<checkpoint_root>/.themis/jobs/<namespace>/<job>  at  /themis-checkpoints
//
// (Nomad's exec driver and docker both mount a device reservation's
// mounts). The planner's pin names THEMIS_CHECKPOINT_DIR
// /themis-checkpoints/<group>/<task> (planner/nomad/foreign.go). On the
// host, .themis and the namespace dir are root's and 0700: no process of
// the node, another job's task of any driver among them, reaches a job's
// dir by its path; through the bind mount, the job's own tasks do, and
// the job dir is 0777 because their user is the driver's business (exec's
// nobody, an image's USER). The themis driver and raw_exec ignore the
// mount. Off unless checkpoint_root is set; a GPU with no lease gets no
// mount (the themis driver refuses such a task; a foreign one runs
// without a checkpoint dir).

// CheckpointMount is where an exec or docker task sees its job's dir.
const CheckpointMount = "/themis-checkpoints"

// jobsDir is where the jobs' dirs live, below the checkpoint root.
var jobsDir = []string{".themis", "jobs"}

// JobCheckpointDir is the host dir Reserve mounts for a job's tasks.
func JobCheckpointDir(root, namespace, job string) string {
	return filepath.Join(append(append([]string{root}, jobsDir...), url.PathEscape(namespace), url.PathEscape(job))...)
}

// GPULeaseReader reads GPU leases; consulLeases reads them from Consul.
type GPULeaseReader interface {
	GPULease(ctx context.Context, id string) (*lease.GPULease, error)
}

// consulLeases reads GPU leases from Consul KV.
type consulLeases struct{ kv *consulapi.KV }

func newConsulLeases(addr, token string) (*consulLeases, error) {
	cfg := consulapi.DefaultConfig()
	cfg.Address = addr
	if token != "" {
		cfg.Token = token
	}
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &consulLeases{kv: c.KV()}, nil
}

func (c *consulLeases) GPULease(ctx context.Context, id string) (*lease.GPULease, error) {
	key := lease.GPUKey(id)
	p, _, err := c.kv.Get(key, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if p == nil {
		return nil, nil
	}
	var l lease.GPULease
	if err := json.Unmarshal(p.Value, &l); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return &l, nil
}

// checkpointMount is the mount of the job the GPUs deviceIDs are leased
// to, making its dir; nil when checkpoints are off or a GPU has no lease.
func (p *Plugin) checkpointMount(deviceIDs []string) (*nomaddevice.Mount, error) {
	p.mu.Lock()
	root, leases := p.checkpointRoot, p.leases
	p.mu.Unlock()
	if root == "" || leases == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var ns, job string
	for _, id := range deviceIDs {
		l, err := leases.GPULease(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("checkpoint mount: GPU %s: %w", id, err)
		}
		if l == nil {
			p.logger.Warn("a GPU being reserved has no lease: no checkpoint dir for its task", "gpu", id)
			return nil, nil
		}
		if ns == "" {
			ns, job = l.Namespace, l.JobID
		} else if l.Namespace != ns || l.JobID != job {
			return nil, fmt.Errorf("checkpoint mount: GPUs %v are leased to two jobs (%s/%s and %s/%s)", deviceIDs, ns, job, l.Namespace, l.JobID)
		}
	}
	dir, err := makeJobDir(root, ns, job)
	if err != nil {
		return nil, err
	}
	return &nomaddevice.Mount{TaskPath: CheckpointMount, HostPath: dir}, nil
}

// makeJobDir makes <root>/.themis/jobs/<ns>/<job> without following a
// symlink: .themis, jobs and the namespace dir root's 0700, the job's 0777.
func makeJobDir(root, ns, job string) (string, error) {
	r, err := nofollow.EnsureRoot(root, 0o711)
	if err != nil {
		return "", fmt.Errorf("checkpoint_root %s: %w", root, err)
	}
	defer r.Close()
	nsDir, err := r.Walk(append(append([]string{}, jobsDir...), url.PathEscape(ns)), 0o700, rootOwned)
	if err != nil {
		return "", fmt.Errorf("checkpoint mount: %w", err)
	}
	defer nsDir.Close()
	if err := checkRootDir(nsDir, 0o700); err != nil {
		return "", fmt.Errorf("checkpoint mount: %w", err)
	}
	d, _, err := nsDir.Sub(url.PathEscape(job), 0o700)
	if err != nil {
		return "", fmt.Errorf("checkpoint mount: %w", err)
	}
	defer d.Close()
	if err := d.Chmod(0o777); err != nil {
		return "", fmt.Errorf("checkpoint mount: %w", err)
	}
	return d.Path(), nil
}

// rootOwned refuses a dir on the way that is not root's, and makes the
// ones the plugin owns 0700.
func rootOwned(path string, st unix.Stat_t) error {
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not root", path, st.Uid)
	}
	return nil
}

// checkRootDir checks that d is root's and makes it mode.
func checkRootDir(d *nofollow.Dir, mode os.FileMode) error {
	st, err := d.Stat()
	if err != nil {
		return err
	}
	if err := rootOwned(d.Path(), st); err != nil {
		return err
	}
	if os.FileMode(st.Mode&0o7777) != mode {
		return d.Chmod(mode)
	}
	return nil
}
