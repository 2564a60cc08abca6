package driver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cpustats"
	cstructs "github.com/hashicorp/nomad/client/structs"
	"github.com/hashicorp/nomad/drivers/shared/eventer"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/drivers/fsisolation"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/spec"
)

const (
	// PluginName is the driver name jobspecs use: driver = "themis".
	PluginName = "themis"
	// PluginVersion is the driver's version, also fingerprinted as the
	// node attribute driver.themis.version.
	PluginVersion = "0.1.0"

	taskHandleVersion = 1
	fingerprintPeriod = 30 * time.Second
	// checkpointReportPeriod: see Driver.checkpointReportPeriod.
	checkpointReportPeriod = 5 * time.Second
	leaseCheckTimeout      = 10 * time.Second
	checkpointDirPerms     = 0o700
	// checkpointParentPerms lets a task's user reach its own checkpoint dir
	// without listing the others.
	checkpointParentPerms = 0o711
)

// Environment variables the driver sets for every task.
const (
	EnvJobID          = spec.EnvJobID
	EnvVC             = spec.EnvVC
	EnvClass          = spec.EnvClass
	EnvGPUs           = spec.EnvGPUs
	EnvGPUIDs         = "THEMIS_GPU_IDS"
	EnvGracePeriod    = spec.EnvGracePeriod
	EnvCheckpointDir  = spec.EnvCheckpointDir
	EnvPriority       = "THEMIS_PRIORITY"
	EnvResumeFrom     = "THEMIS_RESUME_FROM"
	EnvRestartCount   = spec.EnvRestartCount
	EnvNoticeFile     = "THEMIS_NOTICE_FILE"
	attrVersion       = "driver.themis.version"
	attrLeaseCheck    = "driver.themis.lease_check"
	attrCgroups       = "driver.themis.cgroups"
	attrLimits        = "driver.themis.resource_limits"
	attrUsers         = "driver.themis.user_isolation"
	attrDevices       = "driver.themis.device_isolation"
	eventLeaseChecked = "GPU leases verified"
	eventGangWaiting  = "Waiting for the gang's other parts"
	eventGangGathered = "Gang gathered"
)

var (
	pluginInfo = &base.PluginInfoResponse{
		Type:              base.PluginTypeDriver,
		PluginApiVersions: []string{drivers.ApiVersion010},
		PluginVersion:     PluginVersion,
		Name:              PluginName,
	}

	capabilities = &drivers.Capabilities{
		SendSignals:  true,
		Exec:         false,
		FSIsolation:  fsisolation.None,
		MountConfigs: drivers.MountConfigSupportNone,
		NetIsolationModes: []drivers.NetIsolationMode{
			drivers.NetIsolationModeHost,
			drivers.NetIsolationModeGroup,
		},
	}
)

// Option configures a Driver.
type Option func(*Driver)

// WithLeaseReader makes the driver read leases from r instead of Consul.
func WithLeaseReader(r LeaseReader) Option {
	return func(d *Driver) { d.leaseOverride = r }
}

// WithCheckpointReportPeriod sets how often running tasks' checkpoint dirs
// are looked at for a newer complete checkpoint to publish (default 5s).
func WithCheckpointReportPeriod(p time.Duration) Option {
	return func(d *Driver) { d.checkpointReportPeriod = p }
}

// Driver is the themis task driver. See the package doc.
type Driver struct {
	drivers.DriverExecTaskNotSupported

	ctx     context.Context
	logger  hclog.Logger
	eventer *eventer.Eventer

	fingerprintPeriod time.Duration
	leaseOverride     LeaseReader
	// checkpointReportPeriod is how often a running task's checkpoint dir
	// is looked at for a newer complete checkpoint to publish.
	checkpointReportPeriod time.Duration

	mu          sync.RWMutex
	config      Config
	leases      LeaseReader
	compute     cpustats.Compute         // from the agent; turns CPU percent into MHz
	nomadConfig *base.ClientDriverConfig // from the agent; the executor needs it

	tasksMu sync.RWMutex
	tasks   map[string]*taskHandle

	// ids are the dynamic uids the driver's allocations hold.
	ids *identities
	// gpuMu serializes the last look at a task's GPU records with its
	// launch and its own records (gpuholds.go).
	gpuMu sync.Mutex
}

var _ drivers.DriverPlugin = (*Driver)(nil)

// New returns a themis driver; ctx ends its background work.
func New(ctx context.Context, logger hclog.Logger, opts ...Option) *Driver {
	logger = logger.Named(PluginName)
	d := &Driver{
		ctx:                    ctx,
		logger:                 logger,
		eventer:                eventer.NewEventer(ctx, logger),
		fingerprintPeriod:      fingerprintPeriod,
		checkpointReportPeriod: checkpointReportPeriod,
		config:                 Config{LeaseCheck: true}.withDefaults(),
		nomadConfig:            defaultDriverConfig(),
		tasks:                  make(map[string]*taskHandle),
		ids:                    newIdentities(),
	}
	d.compute = d.nomadConfig.Topology.Compute()
	for _, o := range opts {
		o(d)
	}
	d.leases = d.leaseOverride
	return d
}

// PluginInfo implements base.BasePlugin.
func (d *Driver) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }

// ConfigSchema implements base.BasePlugin.
func (d *Driver) ConfigSchema() (*hclspec.Spec, error) { return configSpec(), nil }

// SetConfig implements base.BasePlugin.
func (d *Driver) SetConfig(c *base.Config) error {
	cfg := Config{LeaseCheck: true}
	if len(c.PluginConfig) != 0 {
		cfg = Config{}
		if err := base.MsgPackDecode(c.PluginConfig, &cfg); err != nil {
			return fmt.Errorf("decode %s plugin config: %w", PluginName, err)
		}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	reader := d.leaseOverride
	if reader == nil {
		r, err := NewConsulLeasesToken(cfg.ConsulAddress, cfg.ConsulToken)
		if err != nil {
			return fmt.Errorf("consul_address: %w", err)
		}
		reader = r
	}
	d.mu.Lock()
	d.config, d.leases = cfg, reader
	if c.AgentConfig != nil {
		d.compute = c.AgentConfig.Compute()
		if c.AgentConfig.Driver != nil {
			d.nomadConfig = c.AgentConfig.Driver
		}
	}
	d.mu.Unlock()
	if fi, err := os.Stat(cfg.CheckpointRoot); err == nil && fi.Mode().Perm()&0o001 == 0 {
		d.logger.Warn("checkpoint_root is not traversable by other users: tasks that run as another user than the driver's cannot reach their checkpoint dirs",
			"checkpoint_root", cfg.CheckpointRoot, "mode", fi.Mode().Perm().String())
	}
	d.logger.Info("configured", "consul_address", cfg.ConsulAddress, "lease_check", cfg.LeaseCheck,
		"checkpoint_root", cfg.CheckpointRoot, "keep_checkpoints", cfg.KeepCheckpoints, "default_user", cfg.DefaultUser,
		"allow_root_jobs", cfg.AllowRootJobs)
	return nil
}

func (d *Driver) current() (Config, LeaseReader) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.config, d.leases
}

// TaskConfigSchema implements drivers.DriverPlugin.
func (d *Driver) TaskConfigSchema() (*hclspec.Spec, error) { return taskConfigSpec(), nil }

// Capabilities implements drivers.DriverPlugin.
func (d *Driver) Capabilities() (*drivers.Capabilities, error) { return capabilities, nil }

// Fingerprint implements drivers.DriverPlugin. With lease_check on, the
// driver is unhealthy while Consul cannot be reached, so that Nomad places
// no themis task on a client that cannot check leases.
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	ch := make(chan *drivers.Fingerprint)
	go func() {
		defer close(ch)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			case <-t.C:
			}
			fp := d.buildFingerprint(ctx)
			select {
			case ch <- fp:
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			}
			t.Reset(d.fingerprintPeriod)
		}
	}()
	return ch, nil
}

func (d *Driver) buildFingerprint(ctx context.Context) *drivers.Fingerprint {
	cfg, leases := d.current()
	iso := currentIsolation()
	fp := &drivers.Fingerprint{
		Attributes: map[string]*pstructs.Attribute{
			attrVersion:    pstructs.NewStringAttribute(PluginVersion),
			attrLeaseCheck: pstructs.NewBoolAttribute(cfg.LeaseCheck),
			attrCgroups:    pstructs.NewStringAttribute(iso.cgroups),
			attrLimits:     pstructs.NewBoolAttribute(iso.limits),
			attrUsers:      pstructs.NewBoolAttribute(iso.users),
			attrDevices:    pstructs.NewBoolAttribute(iso.devices),
			// Where the planner's leases say this node's gang parts
			// are (checked in the rendezvous, gang.go).
			lease.AttrGangAddress: pstructs.NewStringAttribute(cfg.AdvertiseAddress),
		},
		Health:            drivers.HealthStateHealthy,
		HealthDescription: iso.describe(),
	}
	if iso.limits {
		if err := d.ensureCgroupParents(); err != nil {
			d.logger.Error("tasks cannot start: the Nomad client's cgroup parents are missing", "error", err)
			fp.Health = drivers.HealthStateUnhealthy
			fp.HealthDescription = "tasks cannot start: " + err.Error()
			return fp
		}
	}
	if iso.devices {
		if gone := sweepDeviceCgroupsV1(); len(gone) > 0 {
			d.logger.Info("removed the devices cgroups of tasks that are over", "cgroups", gone)
		}
	}
	root, err := openCheckpointRoot(cfg.CheckpointRoot)
	if err != nil {
		d.logger.Error("tasks cannot start: the checkpoint root is not safe", "error", err)
		fp.Health = drivers.HealthStateUnhealthy
		fp.HealthDescription = "tasks cannot start: " + err.Error()
		return fp
	}
	if iso.users {
		if gone, err := d.sweepIdentities(root, time.Now()); len(gone) > 0 || err != nil {
			d.logger.Info("released the dynamic uids of tasks a driver left behind", "claims", gone, "error", err)
		}
	}
	root.Close()
	if !cfg.LeaseCheck {
		return fp
	}
	if leases == nil {
		err = errors.New("no lease reader configured")
	} else {
		pctx, cancel := context.WithTimeout(ctx, consulTimeout)
		err = leases.Ping(pctx)
		cancel()
	}
	if err != nil {
		d.logger.Warn("cannot reach the lease store; reporting unhealthy", "consul_address", cfg.ConsulAddress, "error", err)
		fp.Health = drivers.HealthStateUnhealthy
		fp.HealthDescription = fmt.Sprintf("lease_check is on but GPU leases cannot be read from Consul at %s: %v", cfg.ConsulAddress, err)
	}
	return fp
}

func (d *Driver) task(id string) (*taskHandle, error) {
	d.tasksMu.RLock()
	defer d.tasksMu.RUnlock()
	h, ok := d.tasks[id]
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h, nil
}

// gather runs a gang part's rendezvous (gang.go) and returns its gang
// environment.
func (d *Driver) gather(logger hclog.Logger, cfg *drivers.TaskConfig, pcfg Config, leases LeaseReader, part gangPart, uid int) (map[string]string, int, *masterPort, error) {
	g, ok := leases.(GangRendezvous)
	if !ok {
		return nil, 0, nil, errNoRendezvous
	}
	logger.Info("waiting for the gang's other parts", "rank", part.rank, "size", part.size(), "lease", part.lease.LeaseID)
	d.emit(cfg, eventGangWaiting, map[string]string{"rank": strconv.Itoa(part.rank), "size": strconv.Itoa(part.size())})
	start := time.Now()
	members, held, err := rendezvous(d.ctx, leases, g, cfg, part, pcfg.AdvertiseAddress, pcfg.gangTimeout(), uid)
	if err != nil {
		logger.Error("gang did not gather", "rank", part.rank, "error", err)
		return nil, 0, nil, err
	}
	env := gangEnv(part, members)
	logger.Info("gang gathered", "rank", part.rank, "size", part.size(), "waited", time.Since(start), "master", env[EnvMasterAddr]+":"+env[EnvMasterPort])
	d.emit(cfg, eventGangGathered, map[string]string{"rank": strconv.Itoa(part.rank), "peers": env[EnvGangPeers]})
	return env, members[0].UID, held, nil
}

// StartTask implements drivers.DriverPlugin.
func (d *Driver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	if _, err := d.task(cfg.ID); err == nil {
		return nil, nil, fmt.Errorf("task with ID %q already started", cfg.ID)
	}
	logger := d.logger.With("alloc_id", cfg.AllocID, "job_id", cfg.JobID, "task_name", cfg.Name)

	tc, err := decodeTaskConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid task config: %w", err)
	}
	intent, err := tc.intent()
	if err != nil {
		return nil, nil, fmt.Errorf("invalid task config: %w", err)
	}

	pcfg, leases := d.current()
	gpuIDs := allocatedGPUs(cfg)
	gangVars := soloEnv(intent)
	var part gangPart
	var gang bool
	if pcfg.LeaseCheck {
		if leases == nil {
			return nil, nil, errors.New("lease check: no lease reader configured")
		}
		ctx, cancel := context.WithTimeout(d.ctx, leaseCheckTimeout)
		part, gang, err = checkLeases(ctx, leases, cfg, intent)
		cancel()
		if err != nil {
			logger.Error("refusing task", "gpus", gpuIDs, "error", err)
			return nil, nil, err
		}
		d.emit(cfg, eventLeaseChecked, map[string]string{"gpus": strings.Join(gpuIDs, ",")})
	}

	if currentIsolation().limits {
		if err := d.ensureCgroupParents(); err != nil {
			return nil, nil, fmt.Errorf("start task: %w", err)
		}
	}
	taskDir := cfg.TaskDir().Dir
	path, err := resolveCommand(tc.Command, taskDir, cfg.Env["PATH"])
	if err != nil {
		return nil, nil, err
	}
	who, err := resolveUser(pcfg, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid task config: %w", err)
	}
	names, err := checkpointNames(cfg)
	if err != nil {
		return nil, nil, err
	}
	root, err := openCheckpointRoot(pcfg.CheckpointRoot)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	if err := d.waitGPUs(logger, cfg, root, gpuIDs, pcfg.gpuHoldTimeout()); err != nil {
		logger.Error("refusing task", "gpus", gpuIDs, "error", err)
		return nil, nil, err
	}

	// The allocation's identity: a gang's rank 0 (and a one-node job)
	// claims a uid before it joins the rendezvous, where it publishes it;
	// the other ranks take rank 0's after.
	claim := holder{Alloc: cfg.AllocID, Task: cfg.Name, Dir: names}
	held := false
	defer func() {
		if held { // the start failed after the uid was taken
			d.releaseIdentity(logger, pcfg.CheckpointRoot, who, claim)
		}
	}()
	if who.dynamic && (!gang || part.rank == 0) {
		uid, err := d.ids.acquire(root, pcfg.DynamicUserMin, pcfg.DynamicUserMax, claim, taskDirOwner(taskDir))
		if err != nil {
			return nil, nil, err
		}
		who, held = who.withUID(uid, taskDir), true
	}
	var port *masterPort // rank 0's MASTER_PORT, held until the launch
	defer func() { port.release() }()
	if gang {
		ge, rank0UID, mp, err := d.gather(logger, cfg, pcfg, leases, part, who.uid)
		if err != nil {
			return nil, nil, err
		}
		port = mp
		maps.Copy(gangVars, ge)
		if who.dynamic && part.rank > 0 {
			if rank0UID < pcfg.DynamicUserMin || rank0UID > pcfg.DynamicUserMax {
				return nil, nil, fmt.Errorf("gang rendezvous: rank 0 runs as uid %d, outside this driver's dynamic_user_min..dynamic_user_max (%d-%d): every client of a gang needs the same range",
					rank0UID, pcfg.DynamicUserMin, pcfg.DynamicUserMax)
			}
			if err := d.ids.join(root, rank0UID, claim); err != nil {
				return nil, nil, fmt.Errorf("gang rendezvous: %w", err)
			}
			who, held = who.withUID(rank0UID, taskDir), true
		}
	}

	if err := checkCommand(path, who); err != nil {
		return nil, nil, err
	}
	ck, err := openCheckpointDir(root, names)
	if err != nil {
		return nil, nil, err
	}
	err = handOver(logger, ck, who, pcfg.DynamicUserMin, pcfg.DynamicUserMax)
	ck.Close()
	if err != nil {
		return nil, nil, err
	}
	if err := giveTaskDir(logger, cfg, who, pcfg.DynamicUserMin, pcfg.DynamicUserMax); err != nil {
		return nil, nil, err
	}
	if err := fenceShared(logger, cfg, who); err != nil {
		return nil, nil, err
	}
	ckpt := filepath.Join(append([]string{pcfg.CheckpointRoot}, names...)...)
	proto, err := newProtocol(ckpt, pcfg.KeepCheckpoints, intent)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid task config: %w", err)
	}
	proto.root, proto.names, proto.who = pcfg.CheckpointRoot, names, who
	resume, err := proto.prepare(logger)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint dir %s: %w", ckpt, err)
	}
	restarts, err := restartCount(cfg.Env)
	if err != nil {
		logger.Warn("ignoring a bad restart count; the task sees 0", "error", err)
	}
	env := taskEnv(cfg, intent, gpuIDs, checkpointEnv{dir: ckpt, resumeFrom: resume, notice: proto.noticeFile, restarts: restarts}, gangVars, who)
	rules, err := taskDeviceRules(cfg.Devices, pcfg.AllowDevices)
	if err != nil {
		return nil, nil, fmt.Errorf("device isolation: %w", err)
	}
	fence, err := newDeviceFence(cfg, rules)
	if err != nil {
		return nil, nil, err
	}

	port.release() // the workload binds it now
	h, err := d.launchOnGPUs(logger, cfg, root, gpuIDs, launchSpec{path: path, dir: taskDir, args: tc.Args, env: env, user: who, fence: fence, tmp: privateTmp(cfg, who)})
	if err != nil {
		return nil, nil, err
	}
	h.proto = proto
	held = false // the task's now: released when it is destroyed

	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(h.driverState()); err != nil {
		_ = h.exec.Shutdown("SIGKILL", 0)
		h.pluginClient.Kill()
		return nil, nil, fmt.Errorf("encode driver state: %w", err)
	}
	d.tasksMu.Lock()
	d.tasks[cfg.ID] = h
	d.tasksMu.Unlock()
	go h.run()
	if leases != nil {
		go h.reportCheckpoints(d.ctx, leases, d.checkpointReportPeriod)
		if pr, ok := leases.(ProgressReporter); ok && gangVars[EnvGangRank] == "0" && proto.checkpointDir != "" {
			go h.reportProgress(d.ctx, pr, d.checkpointReportPeriod, intent.Iterations, func(why string) { d.emit(cfg, eventProgressRefused, map[string]string{"reason": why}) })
		}
	}
	if resume != "" {
		d.emit(cfg, eventResuming, map[string]string{"checkpoint": resume, "restart_count": strconv.Itoa(restarts)})
	}
	logger.Info("task started", "pid", h.pid, "user", who.name, "uid", who.uid, "command", path, "gpus", gpuIDs, "device_files", deviceFiles(cfg.Devices, fence), "vc", intent.VC,
		"class", intent.Class, "grace_period", intent.GracePeriod.String(), "checkpoint_signal", intent.CheckpointSignal,
		"checkpoint_dir", ckpt, "resume_from", resume, "restart_count", restarts)
	return handle, nil, nil
}

func (d *Driver) emit(cfg *drivers.TaskConfig, msg string, ann map[string]string) {
	err := d.eventer.EmitEvent(&drivers.TaskEvent{
		TaskID: cfg.ID, TaskName: cfg.Name, AllocID: cfg.AllocID,
		Timestamp: time.Now(), Message: msg, Annotations: ann,
	})
	if err != nil {
		d.logger.Debug("task event not delivered", "task_id", cfg.ID, "error", err)
	}
}

// resolveCommand finds command: absolute paths as they are, relative ones
// against the task dir, then bare names on the task's PATH.
func resolveCommand(command, taskDir, pathEnv string) (string, error) {
	if filepath.IsAbs(command) {
		return command, nil
	}
	if p := filepath.Join(taskDir, command); isExecutable(p) {
		return p, nil
	}
	if !strings.ContainsRune(command, filepath.Separator) {
		if pathEnv == "" {
			pathEnv = os.Getenv("PATH")
		}
		for _, dir := range filepath.SplitList(pathEnv) {
			if dir == "" {
				continue
			}
			if p := filepath.Join(dir, command); isExecutable(p) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("command: %q is neither in the task dir %s nor on PATH", command, taskDir)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// RecoverTask implements drivers.DriverPlugin: it re-attaches to the task's
// executor, which still runs the process and will report its real exit.
func (d *Driver) RecoverTask(handle *drivers.TaskHandle) error {
	if handle == nil || handle.Config == nil {
		return errors.New("recover task: handle has no config")
	}
	if _, err := d.task(handle.Config.ID); err == nil {
		return nil
	}
	var st taskState
	if err := handle.GetDriverState(&st); err != nil {
		return fmt.Errorf("recover task %s: decode driver state: %w", handle.Config.ID, err)
	}
	if st.TaskConfig == nil {
		st.TaskConfig = handle.Config
	}
	cfg := st.TaskConfig
	logger := d.logger.With("alloc_id", cfg.AllocID, "job_id", cfg.JobID, "task_name", cfg.Name)
	h, err := d.reattach(logger, st)
	if err != nil {
		return fmt.Errorf("recover task %s: %w", cfg.ID, err)
	}
	h.proto = d.recoverProtocol(st, handle.Config)
	h.who = h.proto.who
	if err := fenceShared(logger, cfg, h.who); err != nil {
		logger.Warn("cannot fence the recovered task's alloc/ and log dir again (a restarted client's Build opened them)", "error", err)
	}
	go refenceAfterRecovery(logger, cfg, h.who, h.done)
	if h.who.dynamic && h.proto.root != "" {
		if err := d.restoreIdentity(h.proto, cfg); err != nil {
			logger.Warn("cannot record the recovered task's dynamic uid as held", "uid", h.who.uid, "error", err)
		}
	}
	if err := restoreGPUs(h.proto.root, cfg, h.pid); err != nil {
		logger.Warn("cannot record the recovered task's GPUs", "error", err)
	}
	d.tasksMu.Lock()
	d.tasks[cfg.ID] = h
	d.tasksMu.Unlock()
	go h.run()
	if _, leases := d.current(); leases != nil {
		go h.reportCheckpoints(d.ctx, leases, d.checkpointReportPeriod)
	}
	h.logger.Info("re-attached to the task's executor after a driver restart")
	return nil
}

// WaitTask implements drivers.DriverPlugin.
func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	h, err := d.task(taskID)
	if err != nil {
		return nil, err
	}
	ch := make(chan *drivers.ExitResult, 1)
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
			return
		case <-d.ctx.Done():
			return
		case <-h.done:
		}
		select {
		case ch <- h.exitResult():
		case <-ctx.Done():
		case <-d.ctx.Done():
		}
	}()
	return ch, nil
}

// StopTask implements drivers.DriverPlugin with the checkpoint protocol:
// it writes the notice file, sends the stanza's checkpoint signal to the
// task's process group, waits until the process exits or the grace period
// (cut to Nomad's timeout when that is shorter) is over, then kills the
// group. Nomad's kill_signal is not used: checkpoint_signal names the signal.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	began := time.Now()
	h, err := d.task(taskID)
	if err != nil {
		return err
	}
	if signal == drivers.DetachSignal || !h.running() {
		return nil
	}
	p := h.proto
	if signal != "" && spec.CanonicalSignal(signal) != p.signalName {
		h.logger.Debug("Nomad's kill_signal is not used; sending the stanza's checkpoint_signal", "kill_signal", signal,
			"checkpoint_signal", p.signalName)
	}
	wait, cut := p.wait(timeout)
	if cut {
		h.logger.Warn("grace period cut by Nomad's kill timeout (min(kill_timeout, max_kill_timeout))",
			"grace_period", p.grace.String(), "timeout", wait.String(), "cut_by", (p.grace - wait).String())
		d.emit(h.cfg, eventGraceCut, map[string]string{
			"grace_period": p.grace.String(), "timeout": wait.String(), "cut_by": (p.grace - wait).String()})
	}
	deadline := began.Add(wait)
	_, leases := d.current()
	reason := stopReason(d.ctx, h.logger, leases, h.cfg, wait)
	notice := Notice{Reason: reason, Deadline: deadline, Signal: p.signalName}
	if err := p.writeNotice(notice); err != nil {
		h.logger.Warn("cannot write the notice file; the signal still goes out", "notice_file", p.noticeFile, "error", err)
	}
	d.emit(h.cfg, eventCheckpointAsk, map[string]string{
		"signal": p.signalName, "reason": reason, "deadline": deadline.UTC().Format(time.RFC3339)})
	killed, err := h.stop(p.signal, deadline)
	if killed {
		d.emit(h.cfg, eventKilledAtExpiry, map[string]string{"deadline": deadline.UTC().Format(time.RFC3339)})
	}
	if err != nil {
		return fmt.Errorf("stop task %s: %w", taskID, err)
	}
	return nil
}

// DestroyTask implements drivers.DriverPlugin.
func (d *Driver) DestroyTask(taskID string, force bool) error {
	h, err := d.task(taskID)
	if err != nil {
		return err
	}
	if h.running() {
		if !force {
			return fmt.Errorf("task %s is still running; destroy it with force", taskID)
		}
		if err := h.kill(); err != nil {
			return fmt.Errorf("destroy task %s: %w", taskID, err)
		}
	}
	h.reapGroup()
	h.stopExecutor()
	d.unfence(h.logger, h.cfg)
	d.tasksMu.Lock()
	_, mine := d.tasks[taskID]
	delete(d.tasks, taskID)
	d.tasksMu.Unlock()
	if mine {
		if err := dropGPUs(h.proto.root, h.cfg, allocatedGPUs(h.cfg)); err != nil {
			h.logger.Warn("cannot remove the task's GPU records; the next start on its GPUs finds its process group gone", "error", err)
		}
	}
	if mine && h.proto.root != "" {
		d.releaseIdentity(h.logger, h.proto.root, h.proto.who, holder{Alloc: h.cfg.AllocID, Task: h.cfg.Name, Dir: h.proto.names})
	}
	return nil
}

// InspectTask implements drivers.DriverPlugin.
func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	h, err := d.task(taskID)
	if err != nil {
		return nil, err
	}
	return h.status(), nil
}

// TaskStats implements drivers.DriverPlugin with the executor's resource
// usage of the task (its cgroup where it has one, else its processes).
func (d *Driver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *cstructs.TaskResourceUsage, error) {
	h, err := d.task(taskID)
	if err != nil {
		return nil, err
	}
	return h.stats(ctx, interval)
}

// TaskEvents implements drivers.DriverPlugin.
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.eventer.TaskEvents(ctx)
}

// SignalTask implements drivers.DriverPlugin.
func (d *Driver) SignalTask(taskID string, signal string) error {
	h, err := d.task(taskID)
	if err != nil {
		return err
	}
	if signal == "" {
		return fmt.Errorf("signal task %s: no signal given", taskID)
	}
	sig, err := parseSignal(signal)
	if err != nil {
		return fmt.Errorf("signal task %s: %w", taskID, err)
	}
	return h.signal(sig)
}
