package driver

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/themis-nomad/themis/planner/spec"
)

// A task's environment and checkpoint dir.

// checkpointDir creates <root>/<namespace>/<job>/<group>/<task>. It lives
// outside the alloc dir, so a replacement alloc of the job on this node finds
// the checkpoints of the one it replaces.
//
// The dirs between checkpoint_root and the task's are the driver's and
// traversable only (0711), so a task sees no other job's names; the task's
// own dir (0700) belongs to the task's user. checkpoint_root itself is made
// 0711 when the driver creates it and otherwise left as the operator set it.
func checkpointDir(root string, cfg *drivers.TaskConfig, owner taskUser) (string, error) {
	parts := []string{root}
	for _, p := range []struct{ what, v string }{
		{"namespace", cfg.Namespace}, {"job id", cfg.JobID}, {"task group", cfg.TaskGroupName}, {"task name", cfg.Name},
	} {
		v := url.PathEscape(p.v)
		if v == "" || v == "." || v == ".." {
			return "", fmt.Errorf("checkpoint dir: %s %q cannot be a directory name", p.what, p.v)
		}
		parts = append(parts, v)
	}
	dir := filepath.Join(parts...)
	if err := os.MkdirAll(dir, checkpointParentPerms); err != nil {
		return "", fmt.Errorf("create checkpoint dir: %w", err)
	}
	// The dirs between the root (the operator's, left as it is) and the
	// task's are the driver's.
	for i := 2; i < len(parts); i++ {
		if err := os.Chmod(filepath.Join(parts[:i]...), checkpointParentPerms); err != nil {
			return "", fmt.Errorf("checkpoint dir: %w", err)
		}
	}
	if err := os.Chmod(dir, checkpointDirPerms); err != nil {
		return "", fmt.Errorf("checkpoint dir: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(dir, owner.uid, owner.gid); err != nil {
			return "", fmt.Errorf("checkpoint dir: give it to the task's user: %w", err)
		}
	}
	return dir, nil
}

// checkpointEnv is the checkpoint protocol's part of a task's env.
type checkpointEnv struct {
	dir        string
	resumeFrom string // "" on a first start
	notice     string
	restarts   int
}

func taskEnv(cfg *drivers.TaskConfig, in spec.Intent, gpuIDs []string, ck checkpointEnv, gang map[string]string) []string {
	env := maps.Clone(cfg.DeviceEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cfg.Env)
	maps.Copy(env, map[string]string{
		EnvJobID:         cfg.JobID,
		EnvVC:            in.VC,
		EnvClass:         string(in.Class),
		EnvGPUs:          strconv.Itoa(in.GPUs),
		EnvGPUIDs:        strings.Join(gpuIDs, ","),
		EnvPriority:      strconv.Itoa(in.Priority),
		EnvGracePeriod:   strconv.FormatFloat(in.GracePeriod.Seconds(), 'f', -1, 64),
		EnvCheckpointDir: ck.dir,
		EnvResumeFrom:    ck.resumeFrom,
		EnvNoticeFile:    ck.notice,
		EnvRestartCount:  strconv.Itoa(ck.restarts),
	})
	if ck.dir != "" {
		env[EnvProgressFile] = filepath.Join(ck.dir, ProgressFileName)
	}
	maps.Copy(env, gang)
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// recoverProtocol rebuilds a re-adopted task's part in the checkpoint
// protocol from its driver state; the state of a driver from before the
// protocol lacks it, and then it comes from the task config Nomad hands
// back, or, failing that, the stanza's defaults.
func (d *Driver) recoverProtocol(st taskState, handleCfg *drivers.TaskConfig) protocol {
	pcfg, _ := d.current()
	cfg := st.TaskConfig
	if cfg == nil {
		cfg = handleCfg
	}
	in := spec.Intent{GracePeriod: st.GracePeriod, CheckpointSignal: st.CheckpointSignal}
	if in.CheckpointSignal == "" {
		in.GracePeriod, in.CheckpointSignal = spec.DefaultGracePeriod, spec.DefaultCheckpointSignal
		if tc, err := decodeTaskConfig(handleCfg); err == nil {
			if full, err := tc.intent(); err == nil {
				in = full
			}
		}
	}
	dir := st.CheckpointDir
	p, err := newProtocol(dir, pcfg.KeepCheckpoints, in)
	if err != nil { // a signal this driver cannot send: fall back to the default
		d.logger.Warn("recovered task has an unknown checkpoint signal; using the default", "task_id", cfg.ID,
			"checkpoint_signal", in.CheckpointSignal, "error", err)
		in.CheckpointSignal = spec.DefaultCheckpointSignal
		p, _ = newProtocol(dir, pcfg.KeepCheckpoints, in)
	}
	return p
}
