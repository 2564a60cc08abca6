package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// A task never starts on a GPU that a process of another allocation still
// holds on this node. Nomad's servers count an allocation lost when its
// node stops heartbeating, and may then place another allocation on the
// same GPUs; but a Nomad client killed with kill -9 leaves its tasks'
// executors, and the tasks, running, and when it is started again it kills
// them only after it has learned from the servers that they are to stop,
// with their kill_timeout, while it may already be starting the new
// allocation. The planner holds a lost allocation's GPUs for a bound
// (planner/lost.go); this is the node's end, for whatever gets past it.
//
// The record: <checkpoint_root>/.themis/gpus/<gpu>, root's, 0600, written
// when a task starts on the GPU (JSON: host, alloc, job, task, the task's
// pid, that is its process group, and the pid's start time) and removed
// when the task is destroyed. It is on disk, so it outlives the driver
// plugin and the Nomad client (the executors do too). A record holds its
// GPU while it names another allocation, this host, and a process group
// that still has a live member (the leader with the recorded start time,
// so that a reused pid is not taken for the task); a record whose group
// is gone is stale and overwritten. It works alike for real and simulated
// GPUs: it goes by the GPU IDs Nomad allocated, not by device files.
//
// A start that finds a GPU held waits, with a task event naming the
// allocation (and pid) that holds it, polling every gpuHoldPoll, up to
// gpu_hold_timeout; then it fails naming the holder (Nomad's restart
// policy may try it again).

// DefaultGPUHoldTimeout is how long a start waits for a GPU's holder.
const DefaultGPUHoldTimeout = 5 * time.Minute

// gpuHoldPoll is how often a waiting start looks at the GPUs again.
var gpuHoldPoll = time.Second

// eventGPUHeld is the task event of a start that waits for a GPU.
const eventGPUHeld = "Waiting for a GPU another allocation's process still holds"

// gpusDir is where GPU records live, below the checkpoint root.
var gpusDir = []string{".themis", "gpus"}

// gpuHold is one GPU's record.
type gpuHold struct {
	GPU   string `json:"gpu"`
	Host  string `json:"host"`
	Alloc string `json:"alloc"`
	Job   string `json:"job"`
	Task  string `json:"task"`
	PID   int    `json:"pid"`
	// PIDStart is the pid's start time (procStat.Start).
	PIDStart uint64    `json:"pid_start"`
	Since    time.Time `json:"since"`
}

func (h gpuHold) String() string {
	return fmt.Sprintf("GPU %s is held by allocation %s (job %s, task %s), whose process group %d still runs on this node",
		h.GPU, h.Alloc, h.Job, h.Task, h.PID)
}

// live reports whether the record's process group still runs on host.
func (h gpuHold) live(host string) bool {
	if h.Host != host || h.PID <= 0 {
		return false
	}
	if st, err := readProcStat(h.PID); err == nil && st.State != 'Z' {
		if h.PIDStart != 0 && st.Start != h.PIDStart {
			return false // the pid is another process's: the group is gone
		}
		return true
	}
	// The leader is gone; its group lives on while a member does (the
	// kernel gives no process a pid that is still a group's id).
	return len(groupMembers(h.PID)) > 0
}

// openGPUs opens (making it, root's, 0700) <root>/.themis/gpus.
func openGPUs(root *nofollow.Dir) (*nofollow.Dir, error) {
	return root.Walk(gpusDir, 0o700, func(path string, st unix.Stat_t) error {
		return nofollow.SafeOwner(path, st)
	})
}

func gpuFile(gpu string) string { return url.PathEscape(gpu) }

// gpuHolders returns the live records of allocations other than alloc on
// gpus.
func gpuHolders(dir *nofollow.Dir, gpus []string, alloc string) []gpuHold {
	host, _ := os.Hostname()
	var out []gpuHold
	for _, g := range gpus {
		b, err := dir.ReadFile(gpuFile(g), 64<<10, os.Geteuid())
		if err != nil {
			continue // none, or not one the driver wrote: not a holder
		}
		var h gpuHold
		if json.Unmarshal(b, &h) != nil || h.Alloc == alloc || !h.live(host) {
			continue
		}
		h.GPU = g
		out = append(out, h)
	}
	return out
}

// holdersError is a start's failure while holds remain.
func holdersError(hs []gpuHold, waited time.Duration) error {
	why := make([]string, len(hs))
	for i, h := range hs {
		why[i] = h.String()
	}
	return fmt.Errorf("GPUs held by another allocation after waiting %s (gpu_hold_timeout): %s", waited.Round(time.Second), strings.Join(why, "; "))
}

// waitGPUs waits until no other allocation's process holds one of the
// task's GPUs, up to timeout, telling the task's events who holds them.
func (d *Driver) waitGPUs(logger hclog.Logger, cfg *drivers.TaskConfig, root *nofollow.Dir, gpus []string, timeout time.Duration) error {
	if len(gpus) == 0 {
		return nil
	}
	dir, err := openGPUs(root)
	if err != nil {
		return fmt.Errorf("GPU records: %w", err)
	}
	defer dir.Close()
	began := time.Now()
	told := ""
	for {
		hs := gpuHolders(dir, gpus, cfg.AllocID)
		if len(hs) == 0 {
			if told != "" {
				logger.Info("the GPUs' holder is gone; starting", "waited", time.Since(began).Round(time.Millisecond).String())
			}
			return nil
		}
		if waited := time.Since(began); waited >= timeout {
			return holdersError(hs, waited)
		}
		if s := hs[0].String(); s != told {
			told = s
			logger.Warn("waiting for a GPU another allocation still holds", "gpu", hs[0].GPU, "holder_alloc", hs[0].Alloc, "holder_pid", hs[0].PID, "timeout", timeout.String())
			d.emit(cfg, eventGPUHeld, map[string]string{"gpu": hs[0].GPU, "holder_alloc": hs[0].Alloc, "holder_job": hs[0].Job,
				"holder_task": hs[0].Task, "holder_pid": strconv.Itoa(hs[0].PID), "timeout": timeout.String()})
		}
		select {
		case <-d.ctx.Done():
			return errors.New("driver shutting down while waiting for a held GPU")
		case <-time.After(gpuHoldPoll):
		}
	}
}

// recordGPUs writes the records of a task that now runs as pid on gpus.
func recordGPUs(root *nofollow.Dir, cfg *drivers.TaskConfig, gpus []string, pid int) error {
	if len(gpus) == 0 {
		return nil
	}
	dir, err := openGPUs(root)
	if err != nil {
		return err
	}
	defer dir.Close()
	host, _ := os.Hostname()
	h := gpuHold{Host: host, Alloc: cfg.AllocID, Job: cfg.Namespace + "/" + cfg.JobID, Task: cfg.Name, PID: pid, Since: time.Now().UTC()}
	if st, err := readProcStat(pid); err == nil {
		h.PIDStart = st.Start
	}
	for _, g := range gpus {
		h.GPU = g
		b, err := json.Marshal(h)
		if err != nil {
			return err
		}
		if err := dir.WriteFileAtomic(gpuFile(g), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// openGPURecords opens the checkpoint root at rootPath and its GPU records
// dir; the caller closes both.
func openGPURecords(rootPath string) (root, dir *nofollow.Dir, err error) {
	root, err = openCheckpointRoot(rootPath)
	if err != nil {
		return nil, nil, err
	}
	dir, err = openGPUs(root)
	if err != nil {
		root.Close()
		return nil, nil, err
	}
	return root, dir, nil
}

// dropGPUs removes the records of gpus that name task cfg's allocation
// (a record another start wrote since stays).
func dropGPUs(rootPath string, cfg *drivers.TaskConfig, gpus []string) error {
	if len(gpus) == 0 || rootPath == "" {
		return nil
	}
	root, dir, err := openGPURecords(rootPath)
	if err != nil {
		return err
	}
	defer root.Close()
	defer dir.Close()
	for _, g := range gpus {
		b, err := dir.ReadFile(gpuFile(g), 64<<10, os.Geteuid())
		if err != nil {
			continue
		}
		var h gpuHold
		if json.Unmarshal(b, &h) == nil && h.Alloc == cfg.AllocID && h.Task == cfg.Name {
			if err := dir.Remove(gpuFile(g)); err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
	}
	return nil
}

// launchOnGPUs launches a task once more no other allocation's process
// holding one of its GPUs (the last look, under gpuMu, so that two starts
// on this node cannot both pass it), and records the task's hold.
func (d *Driver) launchOnGPUs(logger hclog.Logger, cfg *drivers.TaskConfig, root *nofollow.Dir, gpus []string, spec launchSpec) (*taskHandle, error) {
	d.gpuMu.Lock()
	defer d.gpuMu.Unlock()
	if len(gpus) > 0 {
		dir, err := openGPUs(root)
		if err != nil {
			return nil, fmt.Errorf("GPU records: %w", err)
		}
		hs := gpuHolders(dir, gpus, cfg.AllocID)
		dir.Close()
		if len(hs) > 0 {
			return nil, holdersError(hs, 0)
		}
	}
	h, err := d.launch(logger, cfg, spec)
	if err != nil {
		return nil, err
	}
	if err := recordGPUs(root, cfg, gpus, h.pid); err != nil {
		logger.Warn("cannot record the task's GPUs; a start of another allocation on them will not wait for it", "gpus", gpus, "error", err)
	}
	return h, nil
}

// restoreGPUs writes again, for a task recovered after a driver restart,
// the records of its GPUs that are missing or stale (a live record of
// another allocation stays: it is that one's).
func restoreGPUs(rootPath string, cfg *drivers.TaskConfig, pid int) error {
	gpus := allocatedGPUs(cfg)
	if len(gpus) == 0 || rootPath == "" {
		return nil
	}
	root, dir, err := openGPURecords(rootPath)
	if err != nil {
		return err
	}
	defer root.Close()
	defer dir.Close()
	host, _ := os.Hostname()
	var missing []string
	for _, g := range gpus {
		var h gpuHold
		b, err := dir.ReadFile(gpuFile(g), 64<<10, os.Geteuid())
		if err == nil && json.Unmarshal(b, &h) == nil && (h.Alloc == cfg.AllocID || h.live(host)) {
			continue
		}
		missing = append(missing, g)
	}
	return recordGPUs(root, cfg, missing, pid)
}
