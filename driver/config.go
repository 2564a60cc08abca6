package driver

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/themis-nomad/themis/planner/spec"
)

// Defaults of the plugin config.
const (
	DefaultConsulAddress = "127.0.0.1:8500"
	// DefaultKeepCheckpoints is how many complete checkpoints of a task
	// the driver keeps when it prunes.
	DefaultKeepCheckpoints = 3
)

// DefaultCheckpointRoot is where checkpoint directories live unless the
// plugin config names another root: root's, and not under a directory
// everyone may write to (docs/hardening.md).
const DefaultCheckpointRoot = "/var/lib/themis/checkpoints"

// The default range of dynamic workload uids (identity.go): above Nomad's
// own (client.users.dynamic_user_min/max, 80000-89999, for exec2) and
// below where /etc/subuid ranges usually start (100000).
const (
	DefaultDynamicUserMin = 90000
	DefaultDynamicUserMax = 99999
)

// Config is the plugin config, set from the agent's
// `plugin "themis-driver" { config { ... } }` block.
type Config struct {
	// ConsulAddress is the host:port of the Consul agent holding the leases.
	ConsulAddress string `codec:"consul_address"`
	// ConsulToken is the Consul ACL token the driver uses (the policy of
	// examples/acl/driver.consul.hcl); empty: $CONSUL_HTTP_TOKEN, if set.
	ConsulToken string `codec:"consul_token"`
	// LeaseCheck makes StartTask refuse tasks whose GPUs are not leased to
	// their job.
	LeaseCheck bool `codec:"lease_check"`
	// CheckpointRoot is the node-local root of the per-task checkpoint dirs.
	CheckpointRoot string `codec:"checkpoint_root"`
	// KeepCheckpoints is how many complete checkpoints per task survive
	// pruning (at task start and after the task exits); at least 1.
	KeepCheckpoints int `codec:"keep_checkpoints"`
	// DefaultUser is the user tasks that name none run as; empty (the
	// default): each allocation runs as a dynamic uid of its own, from
	// DynamicUserMin to DynamicUserMax (identity.go).
	DefaultUser string `codec:"default_user"`
	// DynamicUserMin and DynamicUserMax bound the dynamic uids.
	DynamicUserMin int `codec:"dynamic_user_min"`
	DynamicUserMax int `codec:"dynamic_user_max"`
	// AllowedUsers lists the users a task may name in its `user`, as
	// "<namespace>/<user>" ("*/<user>": in every namespace); a task of a
	// namespace not listed may name none.
	AllowedUsers []string `codec:"allowed_users"`
	// SupplementaryGroups are the groups (names or gids) every task is in
	// besides its own; none by default.
	SupplementaryGroups []string `codec:"supplementary_groups"`
	// AllowRootJobs lists where tasks may run as root: a namespace (every
	// job in it), "<namespace>/<job>", or "*" for all.
	AllowRootJobs []string `codec:"allow_root_jobs"`
	// AdvertiseAddress is the address the other parts of a multi-node gang
	// reach this node's part at (the gang's MASTER_ADDR when it is rank 0);
	// by default the source address of this host's default route.
	AdvertiseAddress string `codec:"advertise_address"`
	// GangTimeout is how long a part of a multi-node gang waits for the
	// others before its task fails (a Go duration; DefaultGangTimeout).
	GangTimeout string `codec:"gang_timeout"`
	// GPUHoldTimeout is how long a task's start waits for a process of
	// another allocation that still holds one of its GPUs on this node to
	// end before the start fails naming it (gpuholds.go; a Go duration;
	// DefaultGPUHoldTimeout).
	GPUHoldTimeout string `codec:"gpu_hold_timeout"`
	// AllowDevices are host device files (or directories of them, such as
	// /dev/infiniband) every task may open besides runc's defaults and
	// the devices reserved for it (devices.go); absolute paths.
	AllowDevices []string `codec:"allow_devices"`
}

// gpuHoldTimeout is GPUHoldTimeout parsed (validate checked it).
func (c Config) gpuHoldTimeout() time.Duration {
	d, err := time.ParseDuration(c.GPUHoldTimeout)
	if err != nil || d <= 0 {
		return DefaultGPUHoldTimeout
	}
	return d
}

// gangTimeout is GangTimeout parsed (validate checked it).
func (c Config) gangTimeout() time.Duration {
	d, err := time.ParseDuration(c.GangTimeout)
	if err != nil || d <= 0 {
		return DefaultGangTimeout
	}
	return d
}

// TaskConfig is the driver config of one task in a jobspec.
type TaskConfig struct {
	Command string      `codec:"command"`
	Args    []string    `codec:"args"`
	Themis  spec.Stanza `codec:"themis"`
}

func configSpec() *hclspec.Spec {
	return hclspec.NewObject(map[string]*hclspec.Spec{
		"consul_address": hclspec.NewDefault(
			hclspec.NewAttr("consul_address", "string", false),
			hclspec.NewLiteral(strconv.Quote(DefaultConsulAddress)),
		),
		"consul_token": hclspec.NewAttr("consul_token", "string", false),
		"lease_check": hclspec.NewDefault(
			hclspec.NewAttr("lease_check", "bool", false),
			hclspec.NewLiteral("true"),
		),
		"checkpoint_root": hclspec.NewDefault(
			hclspec.NewAttr("checkpoint_root", "string", false),
			hclspec.NewLiteral(strconv.Quote(DefaultCheckpointRoot)),
		),
		"keep_checkpoints": hclspec.NewDefault(
			hclspec.NewAttr("keep_checkpoints", "number", false),
			hclspec.NewLiteral(strconv.Itoa(DefaultKeepCheckpoints)),
		),
		"default_user": hclspec.NewAttr("default_user", "string", false),
		"dynamic_user_min": hclspec.NewDefault(
			hclspec.NewAttr("dynamic_user_min", "number", false),
			hclspec.NewLiteral(strconv.Itoa(DefaultDynamicUserMin)),
		),
		"dynamic_user_max": hclspec.NewDefault(
			hclspec.NewAttr("dynamic_user_max", "number", false),
			hclspec.NewLiteral(strconv.Itoa(DefaultDynamicUserMax)),
		),
		"allowed_users":        hclspec.NewAttr("allowed_users", "list(string)", false),
		"supplementary_groups": hclspec.NewAttr("supplementary_groups", "list(string)", false),
		"allow_root_jobs":      hclspec.NewAttr("allow_root_jobs", "list(string)", false),
		"advertise_address":    hclspec.NewAttr("advertise_address", "string", false),
		"allow_devices":        hclspec.NewAttr("allow_devices", "list(string)", false),
		"gang_timeout": hclspec.NewDefault(
			hclspec.NewAttr("gang_timeout", "string", false),
			hclspec.NewLiteral(strconv.Quote(DefaultGangTimeout.String())),
		),
		"gpu_hold_timeout": hclspec.NewDefault(
			hclspec.NewAttr("gpu_hold_timeout", "string", false),
			hclspec.NewLiteral(strconv.Quote(DefaultGPUHoldTimeout.String())),
		),
	})
}

// taskConfigSpec keeps every stanza attribute but gpus optional: defaults are
// applied, and rules checked, by spec.Stanza.Intent so that the planner and
// the driver can never disagree.
func taskConfigSpec() *hclspec.Spec {
	return hclspec.NewObject(map[string]*hclspec.Spec{
		"command": hclspec.NewAttr("command", "string", true),
		"args":    hclspec.NewAttr("args", "list(string)", false),
		spec.BlockName: hclspec.NewBlock(spec.BlockName, true, hclspec.NewObject(map[string]*hclspec.Spec{
			"gpus":              hclspec.NewAttr("gpus", "number", true),
			"vc":                hclspec.NewAttr("vc", "string", false),
			"class":             hclspec.NewAttr("class", "string", false),
			"priority":          hclspec.NewAttr("priority", "number", false),
			"grace_period":      hclspec.NewAttr("grace_period", "string", false),
			"checkpoint_signal": hclspec.NewAttr("checkpoint_signal", "string", false),
			"app":               hclspec.NewAttr("app", "string", false),
			"iterations":        hclspec.NewAttr("iterations", "number", false),
			"model":             hclspec.NewAttr("model", "string", false),
		})),
	})
}

// withDefaults fills what an empty (not HCL-decoded) config leaves unset.
// An unset lease_check cannot be told from false here, so only the strings
// are defaulted; the HCL schema defaults lease_check to true.
func (c Config) withDefaults() Config {
	if c.ConsulAddress == "" {
		c.ConsulAddress = DefaultConsulAddress
	}
	if c.CheckpointRoot == "" {
		c.CheckpointRoot = DefaultCheckpointRoot
	}
	if c.KeepCheckpoints == 0 {
		c.KeepCheckpoints = DefaultKeepCheckpoints
	}
	if c.DynamicUserMin == 0 && c.DynamicUserMax == 0 {
		c.DynamicUserMin, c.DynamicUserMax = DefaultDynamicUserMin, DefaultDynamicUserMax
	}
	if c.AdvertiseAddress == "" {
		c.AdvertiseAddress = defaultAdvertise()
	}
	if c.GangTimeout == "" {
		c.GangTimeout = DefaultGangTimeout.String()
	}
	if c.GPUHoldTimeout == "" {
		c.GPUHoldTimeout = DefaultGPUHoldTimeout.String()
	}
	return c
}

// validate checks a config after withDefaults; errors name the field.
func (c Config) validate() error {
	if !filepath.IsAbs(c.CheckpointRoot) {
		return fmt.Errorf("checkpoint_root: must be an absolute path, got %q", c.CheckpointRoot)
	}
	if c.KeepCheckpoints < 1 {
		return fmt.Errorf("keep_checkpoints: must be at least 1, got %d", c.KeepCheckpoints)
	}
	if d, err := time.ParseDuration(c.GangTimeout); c.GangTimeout != "" && (err != nil || d <= 0) {
		return fmt.Errorf("gang_timeout: want a positive duration such as \"5m\", got %q", c.GangTimeout)
	}
	if d, err := time.ParseDuration(c.GPUHoldTimeout); c.GPUHoldTimeout != "" && (err != nil || d <= 0) {
		return fmt.Errorf("gpu_hold_timeout: want a positive duration such as \"5m\", got %q", c.GPUHoldTimeout)
	}
	if c.AdvertiseAddress != "" && net.ParseIP(c.AdvertiseAddress) == nil {
		return fmt.Errorf("advertise_address: want an IP address, got %q", c.AdvertiseAddress)
	}
	for _, p := range c.AllowDevices {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("allow_devices: want absolute paths of device files or directories, got %q", p)
		}
	}
	for _, j := range c.AllowRootJobs {
		if ns, _, _ := strings.Cut(j, "/"); j != AllowRootAll && !validNamespace(ns) {
			return fmt.Errorf("allow_root_jobs: want a namespace, \"<namespace>/<job>\" or %q, got %q", AllowRootAll, j)
		}
	}
	unset := c.DynamicUserMin == 0 && c.DynamicUserMax == 0 // withDefaults fills them
	if !unset && (c.DynamicUserMin < 1 || c.DynamicUserMax < c.DynamicUserMin || c.DynamicUserMax > maxDynamicUID) {
		return fmt.Errorf("dynamic_user_min, dynamic_user_max: want 1 <= min <= max <= %d, got %d and %d",
			maxDynamicUID, c.DynamicUserMin, c.DynamicUserMax)
	}
	for _, e := range c.AllowedUsers {
		ns, u, ok := strings.Cut(e, "/")
		if !ok || u == "" || strings.Contains(u, "/") || ns != AllowRootAll && !validNamespace(ns) {
			return fmt.Errorf("allowed_users: want \"<namespace>/<user>\" or \"%s/<user>\", got %q", AllowRootAll, e)
		}
	}
	if _, err := supplementaryGIDs(c.SupplementaryGroups); err != nil {
		return err
	}
	return nil
}

// validNamespace: Nomad's rule for namespace names ([a-zA-Z0-9-], 1 to
// 128 characters).
func validNamespace(ns string) bool {
	if ns == "" || len(ns) > 128 {
		return false
	}
	for _, r := range ns {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// wireTaskConfig is TaskConfig as it arrives: HCL numbers may be fractional,
// which a msgpack decode straight into spec.Stanza's ints rejects with an
// error that names no field.
type wireTaskConfig struct {
	Command string   `codec:"command"`
	Args    []string `codec:"args"`
	Themis  struct {
		GPUs        float64 `codec:"gpus"`
		VC          string  `codec:"vc"`
		Class       string  `codec:"class"`
		Priority    float64 `codec:"priority"`
		GracePeriod string  `codec:"grace_period"`
		Signal      string  `codec:"checkpoint_signal"`
		App         string  `codec:"app"`
		Iterations  float64 `codec:"iterations"`
		Model       string  `codec:"model"`
	} `codec:"themis"`
}

// decodeTaskConfig decodes a task's driver config; errors name the field.
func decodeTaskConfig(cfg *drivers.TaskConfig) (TaskConfig, error) {
	var w wireTaskConfig
	if err := cfg.DecodeDriverConfig(&w); err != nil {
		return TaskConfig{}, fmt.Errorf("decode task config: %w", err)
	}
	tc := TaskConfig{Command: w.Command, Args: w.Args, Themis: spec.Stanza{
		VC: w.Themis.VC, Class: w.Themis.Class, GracePeriod: w.Themis.GracePeriod, CheckpointSignal: w.Themis.Signal,
		App: w.Themis.App, Model: w.Themis.Model,
	}}
	var err error
	if tc.Themis.GPUs, err = spec.WholeNumber("gpus", w.Themis.GPUs); err != nil {
		return TaskConfig{}, err
	}
	if tc.Themis.Priority, err = spec.WholeNumber("priority", w.Themis.Priority); err != nil {
		return TaskConfig{}, err
	}
	if tc.Themis.Iterations, err = spec.WholeNumber("iterations", w.Themis.Iterations); err != nil {
		return TaskConfig{}, err
	}
	return tc, nil
}

// intent validates the task config and returns the stanza's intent. Errors
// name the field.
func (tc TaskConfig) intent() (spec.Intent, error) {
	if tc.Command == "" {
		return spec.Intent{}, fmt.Errorf("command: is required")
	}
	return tc.Themis.Intent()
}
