package driver

import (
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/themis-nomad/themis/planner/spec"
)

// A task's environment.

// checkpointEnv is the checkpoint protocol's part of a task's env.
type checkpointEnv struct {
	dir        string
	resumeFrom string // "" on a first start
	notice     string
	restarts   int
}

func taskEnv(cfg *drivers.TaskConfig, in spec.Intent, gpuIDs []string, ck checkpointEnv, gang map[string]string, who taskUser) []string {
	env := maps.Clone(cfg.DeviceEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cfg.Env)
	if !who.self {
		// What Nomad's executor sets for a task's user (the shim starts
		// the task, runas.go); a dynamic uid's home is its task dir.
		env["USER"], env["LOGNAME"], env["HOME"] = who.name, who.name, who.home
	}
	if hasPrivateTmp(who) {
		// Its own tmpfs there (privatetmp.go), not the host's /tmp.
		env["TMPDIR"] = filepath.Join(cfg.TaskDir().Dir, "tmp")
	}
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
	p.root, p.names, p.who = st.CheckpointRoot, st.CheckpointNames, st.RunAs.user()
	if p.root == "" && dir != "" { // a task of a driver from before: its layout
		if names, err := checkpointNames(cfg); err == nil && filepath.Join(append([]string{pcfg.CheckpointRoot}, names...)...) == dir {
			p.root, p.names = pcfg.CheckpointRoot, names
		}
	}
	return p
}
