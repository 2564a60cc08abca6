package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/taskenv"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/checkpoint"
	"github.com/themis-nomad/themis/driver/nofollow"
	"github.com/themis-nomad/themis/planner/spec"
)

// The checkpoint protocol: what the driver tells a task at start and does
// when Nomad stops it. See the package doc and docs/checkpoints.md.

// NoticeFileName is the notice file's name inside the checkpoint dir.
const NoticeFileName = "notice.json"

// DefaultStopReason is the notice's reason when the job's lease carries no
// revoke: Nomad stopped the task for its own reasons (job stopped, alloc
// stopped, node drained).
const DefaultStopReason = "stopped by Nomad"

// revokeReadTimeout bounds the best-effort read of the job's lease in
// StopTask; it also never takes more than a quarter of the grace.
const revokeReadTimeout = time.Second

// Task events of the protocol.
const (
	eventResuming       = "Resuming from checkpoint"
	eventCheckpointAsk  = "Asked the task to checkpoint"
	eventGraceCut       = "Grace period cut by Nomad's kill timeout"
	eventKilledAtExpiry = "Grace period over; killed the task's process group"
)

// Notice is what the driver writes to the notice file when it stops a task,
// for workloads that poll a file rather than trap a signal.
type Notice struct {
	// Reason says why: the revoke reason from the job's lease, or
	// DefaultStopReason.
	Reason string `json:"reason"`
	// Deadline is when the driver kills the task's process group if it has
	// not exited (RFC 3339, UTC).
	Deadline time.Time `json:"deadline"`
	// Signal is the checkpoint signal the driver sends with the notice.
	Signal string `json:"signal"`
}

// protocol is a task's part in the checkpoint protocol.
type protocol struct {
	checkpointDir string
	noticeFile    string
	// root and names locate the checkpoint dir for reopening it without
	// following a symlink (ckptdir.go); who is the task's user, as whom
	// the driver works in it (asUser).
	root       string
	names      []string
	who        taskUser
	keep       int
	grace      time.Duration
	signal     syscall.Signal
	signalName string
}

func newProtocol(ckptDir string, keep int, in spec.Intent) (protocol, error) {
	sig, err := parseSignal(in.CheckpointSignal)
	if err != nil {
		return protocol{}, fmt.Errorf("themis.checkpoint_signal: %w", err)
	}
	notice := ""
	if ckptDir != "" {
		notice = filepath.Join(ckptDir, NoticeFileName)
	}
	return protocol{
		checkpointDir: ckptDir,
		noticeFile:    notice,
		keep:          keep,
		grace:         in.GracePeriod,
		signal:        sig,
		signalName:    in.CheckpointSignal,
	}, nil
}

// inDir runs fn on the task's checkpoint dir, opened from the root
// without following a symlink (the dirs above it checked to be root's),
// as the task's user.
func (p protocol) inDir(fn func(d *nofollow.Dir) error) error {
	if p.root == "" || len(p.names) == 0 {
		return errors.New("no checkpoint dir")
	}
	root, err := openCheckpointRoot(p.root)
	if err != nil {
		return err
	}
	defer root.Close()
	d, err := root.Walk(p.names, 0, func(path string, st unix.Stat_t) error {
		if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("%s is owned by uid %d, not root", path, st.Uid)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint dir: %w", err)
	}
	defer d.Close()
	return asUser(p.who, func() error { return fn(d) })
}

// prepare readies the checkpoint dir for a start: it removes a stale notice
// and prunes old checkpoints, and returns the newest complete checkpoint's
// path ("" when there is none) for THEMIS_RESUME_FROM. It works as the
// task's user.
func (p protocol) prepare(logger hclog.Logger) (string, error) {
	var resume string
	err := p.inDir(func(d *nofollow.Dir) error {
		if err := d.Remove(NoticeFileName); err != nil {
			return fmt.Errorf("remove stale notice file: %w", err)
		}
		p.pruneAsUser(logger)
		c, ok, err := checkpoint.Latest(p.checkpointDir)
		if ok {
			resume = c.Path
		}
		return err
	})
	return resume, err
}

// prune keeps the newest complete checkpoints; failures are logged, as a
// checkpoint left behind costs disk space, not correctness. It works as
// the task's user.
func (p protocol) prune(logger hclog.Logger) {
	if err := p.inDir(func(*nofollow.Dir) error { p.pruneAsUser(logger); return nil }); err != nil {
		logger.Warn("cannot prune checkpoints", "checkpoint_dir", p.checkpointDir, "error", err)
	}
}

func (p protocol) pruneAsUser(logger hclog.Logger) {
	removed, err := checkpoint.Prune(p.checkpointDir, p.keep)
	if len(removed) > 0 {
		logger.Info("pruned checkpoints", "checkpoint_dir", p.checkpointDir, "keep", p.keep, "removed", removed)
	}
	if err != nil {
		logger.Warn("cannot prune checkpoints", "checkpoint_dir", p.checkpointDir, "error", err)
	}
}

// latest is the newest complete checkpoint, looked for as the task's user.
func (p protocol) latest() (c checkpoint.Checkpoint, ok bool, err error) {
	err = p.inDir(func(*nofollow.Dir) error {
		var lerr error
		c, ok, lerr = checkpoint.Latest(p.checkpointDir)
		return lerr
	})
	return c, ok, err
}

// wait is how long a stopping task may take to checkpoint: its grace
// period, or Nomad's kill timeout when that is shorter (the client's
// max_kill_timeout caps it). cut reports the latter.
func (p protocol) wait(timeout time.Duration) (wait time.Duration, cut bool) {
	if timeout < 0 {
		timeout = 0
	}
	if timeout < p.grace {
		return timeout, true
	}
	return p.grace, false
}

// writeNotice writes the notice file atomically (a temporary renamed over
// it, as the task's user, never through a symlink), readable by the task,
// so a polling workload never reads half of it.
func (p protocol) writeNotice(n Notice) error {
	if p.noticeFile == "" {
		return errors.New("no checkpoint dir to write the notice file into")
	}
	n.Deadline = n.Deadline.UTC().Truncate(time.Second)
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return p.inDir(func(d *nofollow.Dir) error {
		if err := d.WriteFileAtomic(NoticeFileName, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write notice file: %w", err)
		}
		return nil
	})
}

// ReadNotice reads a notice file (for workloads written in Go and tests).
func ReadNotice(path string) (Notice, error) {
	var n Notice
	b, err := os.ReadFile(path)
	if err != nil {
		return n, err
	}
	if err := json.Unmarshal(b, &n); err != nil {
		return n, fmt.Errorf("notice file %s: %w", path, err)
	}
	return n, nil
}

// stopReason reads why the task is being stopped from the job's lease
// (Revoke.Reason), best effort and within a short bound; without one it is
// DefaultStopReason.
func stopReason(ctx context.Context, logger hclog.Logger, leases LeaseReader, cfg *drivers.TaskConfig, budget time.Duration) string {
	if leases == nil || budget <= 0 {
		return DefaultStopReason
	}
	ctx, cancel := context.WithTimeout(ctx, min(revokeReadTimeout, budget/4))
	defer cancel()
	jl, err := leases.JobLease(ctx, cfg.Namespace, cfg.JobID)
	if err != nil {
		logger.Debug("cannot read the job's lease for a revoke reason", "error", err)
		return DefaultStopReason
	}
	if jl == nil || jl.Revoke == nil || strings.TrimSpace(jl.Revoke.Reason) == "" {
		return DefaultStopReason
	}
	return jl.Revoke.Reason
}

// metaRestartCountEnv are the names under which Nomad passes the job meta
// key spec.MetaRestartCount to a task: client/taskenv adds NOMAD_META_ to
// the key as given and upper-cased, and its env-key cleaning keeps dots.
var metaRestartCountEnv = []string{
	taskenv.MetaPrefix + spec.MetaRestartCount,
	taskenv.MetaPrefix + strings.ToUpper(spec.MetaRestartCount),
}

// restartCount reads how many times the planner preempted and resumed the
// job from the task's env; missing means 0.
func restartCount(env map[string]string) (int, error) {
	for _, k := range metaRestartCountEnv {
		v, ok := env[k]
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("job meta %s: must be a whole number of restarts, got %q", spec.MetaRestartCount, v)
		}
		return n, nil
	}
	return 0, nil
}

// parseSignal turns "SIGTERM", "TERM" or "" (SIGINT) into a signal.
func parseSignal(name string) (syscall.Signal, error) {
	if name == "" {
		return syscall.SIGINT, nil
	}
	if s := unix.SignalNum(spec.CanonicalSignal(name)); s != 0 {
		return s, nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}
