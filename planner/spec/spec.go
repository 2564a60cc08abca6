// Package spec parses and validates the `themis { ... }` stanza that users put
// inside a themis task's driver `config` block. The stanza carries scheduling
// intent: how many GPUs, which virtual cluster (tenant), which job class, the
// priority inside the VC, and the grace period for checkpoint-on-preemption.
//
// Two readers share this package so that they can never disagree: the planner,
// which reads the stanza from the job as Nomad's API returns it (a loosely typed
// map), and the task driver, whose HCL schema decodes the same block on the
// client.
package spec

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// BlockName is the name of the stanza inside a task's driver config.
const BlockName = "themis"

// Class is a job class in the FitGpp sense.
type Class string

const (
	// ClassBestEffort jobs are the bulk of the work; they may be preempted.
	ClassBestEffort Class = "be"
	// ClassTrialAndError jobs are short "does it even train?" jobs that
	// should start quickly.
	ClassTrialAndError Class = "te"
)

// Limits and defaults of the stanza's fields.
const (
	MaxGPUs            = 1024
	DefaultVC          = "default"
	DefaultClass       = ClassBestEffort
	DefaultGracePeriod = 30 * time.Second
	// MaxGracePeriod bounds the stanza alone. A grace period that long only
	// holds if the client's max_kill_timeout allows it: Nomad gives the
	// driver min(kill_timeout, max_kill_timeout) to stop a task, and the
	// driver cuts the grace to that. The planner, which knows the clients'
	// configs, checks the grace against max_kill_timeout; this package stays
	// free of agent config.
	MaxGracePeriod = 24 * time.Hour
	// DefaultCheckpointSignal is sent to the task's process group when it
	// must checkpoint and exit.
	DefaultCheckpointSignal = "SIGTERM"
	// PriorityOpportunistic marks a job that may use any idle GPU and is
	// preempted when a guaranteed job (priority >= 0) needs it (HiveD).
	PriorityOpportunistic = -1
	MaxPriority           = 1000
)

// Fields lists the stanza's attributes, in the order the docs present them.
var Fields = []string{"gpus", "vc", "class", "priority", "grace_period", "checkpoint_signal", "app", "iterations", "model"}

// CheckpointSignals are the signals checkpoint_signal may name: those a
// workload can trap (not SIGKILL or SIGSTOP) and that mean "stop" by
// convention or by agreement.
var CheckpointSignals = []string{"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

// The task environment the themis driver sets, and the planner's pin sets
// for tasks of other drivers (planner/nomad/foreign.go): one list of names
// for both.
const (
	EnvJobID         = "THEMIS_JOB_ID"
	EnvVC            = "THEMIS_VC"
	EnvClass         = "THEMIS_CLASS"
	EnvGPUs          = "THEMIS_GPUS"
	EnvGracePeriod   = "THEMIS_GRACE_PERIOD"
	EnvCheckpointDir = "THEMIS_CHECKPOINT_DIR"
	EnvRestartCount  = "THEMIS_RESTART_COUNT"
)

// MetaRestartCount is the job meta key the planner sets when it pins a job:
// how many times the job was preempted and resumed, in decimal. Nomad
// exposes it to the task as NOMAD_META_themis.restart_count (and upper-cased,
// NOMAD_META_THEMIS.RESTART_COUNT): its env cleaning keeps dots.
const MetaRestartCount = "themis.restart_count"

// The other job meta keys the planner writes on the jobs it pins and
// suspends (planner/nomad says what each holds). Like MetaRestartCount
// they are not stanza fields: in a task's or group's meta they do not make
// it a themis task, and the planner rejects a job that sets them there.
//
// MetaLease holds a pinned job's lease ID. Planners before #34 wrote it as
// MetaLeaseOld ("themis.lease", the spelling of the Themis policy's
// lease-length knob too); the planner reads both, writes only MetaLease and
// deletes MetaLeaseOld whenever it rewrites a job's meta, and both are
// reserved.
const (
	MetaLease     = "themis.lease_id"
	MetaLeaseOld  = "themis.lease"
	MetaSuspended = "themis.suspended"
	MetaCount     = "themis.count"
	MetaGang      = "themis.gang"
	// MetaHeld names, on a job version the planner holds (count 0),
	// the hold its record keeps (lease.Hold.ID).
	MetaHeld = "themis.held"
)

var vcName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// appName and modelName are what app and model may hold.
var (
	appName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$`)
)

// MaxIterations bounds the iterations a job may plan.
const MaxIterations = 1 << 31

// Intent is the validated scheduling intent of one task.
type Intent struct {
	GPUs        int
	VC          string
	Class       Class
	Priority    int
	GracePeriod time.Duration
	// CheckpointSignal is the canonical name ("SIGTERM") of the signal that
	// asks the workload to checkpoint and exit.
	CheckpointSignal string
	// App names the job's app in the Themis sense: the jobs of one
	// hyper-parameter sweep share it; "" means the job is an app of its
	// own (the planner uses the job ID).
	App string
	// Iterations is the work the job plans to do (0: not said); with the
	// progress it reports, the planner estimates its remaining time.
	Iterations int
	// Model names what the job trains ("resnet50", "bert", or a class of
	// planner/models: "cv-high", "cv", "nlp", "speech"); it selects the
	// job's placement sensitivity. "" means the default class.
	Model string
}

// Stanza is the stanza as decoded by the driver's HCL schema; its zero values
// are replaced by defaults in Intent.
type Stanza struct {
	GPUs        int    `codec:"gpus"`
	VC          string `codec:"vc"`
	Class       string `codec:"class"`
	Priority    int    `codec:"priority"`
	GracePeriod string `codec:"grace_period"`
	// CheckpointSignal is a name from CheckpointSignals, with or without
	// "SIG", in any case.
	CheckpointSignal string `codec:"checkpoint_signal"`
	App              string `codec:"app"`
	Iterations       int    `codec:"iterations"`
	Model            string `codec:"model"`
}

// FieldError is a user error in the stanza; it names the field and the value.
type FieldError struct {
	Field  string
	Value  any
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("%s.%s: %s", BlockName, e.Field, e.Reason)
	}
	return fmt.Sprintf("%s.%s: %s, got %s", BlockName, e.Field, e.Reason, show(e.Value))
}

func show(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case float64:
		return fmt.Sprintf("%g", v)
	default:
		return fmt.Sprintf("%v", v)
	}
}

// Intent validates the decoded stanza and applies defaults.
func (s Stanza) Intent() (Intent, error) {
	in := Intent{GPUs: s.GPUs, VC: s.VC, Class: Class(s.Class), Priority: s.Priority, GracePeriod: DefaultGracePeriod,
		CheckpointSignal: DefaultCheckpointSignal, App: s.App, Iterations: s.Iterations, Model: s.Model}
	if in.VC == "" {
		in.VC = DefaultVC
	}
	if in.Class == "" {
		in.Class = DefaultClass
	}
	if s.GracePeriod != "" {
		d, err := time.ParseDuration(s.GracePeriod)
		if err != nil {
			return Intent{}, &FieldError{"grace_period", s.GracePeriod, `must be a duration such as "30s" or "5m"`}
		}
		in.GracePeriod = d
	}
	if s.CheckpointSignal != "" {
		in.CheckpointSignal = CanonicalSignal(s.CheckpointSignal)
		if !isCheckpointSignal(in.CheckpointSignal) {
			return Intent{}, &FieldError{"checkpoint_signal", s.CheckpointSignal, checkpointSignalRule()}
		}
	}
	return in, in.Validate()
}

// Validate checks the semantic rules of every field.
func (in Intent) Validate() error {
	switch {
	case in.GPUs < 1 || in.GPUs > MaxGPUs:
		return &FieldError{"gpus", in.GPUs, fmt.Sprintf("must be a whole number from 1 to %d", MaxGPUs)}
	case !vcName.MatchString(in.VC):
		return &FieldError{"vc", in.VC, "must be a virtual cluster name: lower-case letters, digits, '-' and '_', at most 63 characters"}
	case in.Class != ClassBestEffort && in.Class != ClassTrialAndError:
		return &FieldError{"class", string(in.Class), `must be "be" (best effort) or "te" (trial and error)`}
	case in.Priority < PriorityOpportunistic || in.Priority > MaxPriority:
		return &FieldError{"priority", in.Priority, fmt.Sprintf("must be a whole number from -1 (opportunistic) to %d", MaxPriority)}
	case in.GracePeriod < 0 || in.GracePeriod > MaxGracePeriod:
		return &FieldError{"grace_period", in.GracePeriod.String(), fmt.Sprintf("must be between 0s and %s", MaxGracePeriod)}
	case !isCheckpointSignal(in.CheckpointSignal):
		return &FieldError{"checkpoint_signal", in.CheckpointSignal, checkpointSignalRule()}
	case in.App != "" && !appName.MatchString(in.App):
		return &FieldError{"app", in.App, "must be an app name: letters, digits, '.', '-' and '_', at most 128 characters"}
	case in.Iterations < 0 || in.Iterations > MaxIterations:
		return &FieldError{"iterations", in.Iterations, fmt.Sprintf("must be a whole number from 0 (not said) to %d", MaxIterations)}
	case in.Model != "" && !modelName.MatchString(in.Model):
		return &FieldError{"model", in.Model, "must be a model name such as \"resnet50\": letters, digits, '.', '/', '-' and '_', at most 64 characters"}
	}
	return nil
}

// FromTaskConfig finds the stanza in a task's driver config as Nomad's API
// returns it (blocks decode as a list of maps; numbers as float64 or int) and
// validates it. found is false when the config has no stanza at all.
func FromTaskConfig(config map[string]any) (in Intent, found bool, err error) {
	raw, ok := config[BlockName]
	if !ok || raw == nil {
		return Intent{}, false, nil
	}
	block, err := singleBlock(raw)
	if err != nil {
		return Intent{}, true, err
	}
	in, err = fromMap(block)
	return in, true, err
}

func singleBlock(raw any) (map[string]any, error) {
	switch v := raw.(type) {
	case map[string]any:
		return v, nil
	case []any:
		if len(v) != 1 {
			return nil, fmt.Errorf("%s: exactly one %q block is allowed in a task, found %d", BlockName, BlockName, len(v))
		}
		return singleBlock(v[0])
	case []map[string]any:
		if len(v) != 1 {
			return nil, fmt.Errorf("%s: exactly one %q block is allowed in a task, found %d", BlockName, BlockName, len(v))
		}
		return v[0], nil
	default:
		return nil, fmt.Errorf("%s: must be a block, got %T", BlockName, raw)
	}
}

func fromMap(m map[string]any) (Intent, error) {
	var unknown []string
	for k := range m {
		if !known(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Intent{}, &FieldError{unknown[0], nil, "unknown field; the stanza accepts " + strings.Join(Fields, ", ")}
	}
	var s Stanza
	var err error
	v, ok := m["gpus"]
	if !ok {
		return Intent{}, &FieldError{"gpus", nil, "is required: the number of GPUs the task needs"}
	}
	if s.GPUs, err = WholeNumber("gpus", v); err != nil {
		return Intent{}, err
	}
	if v, ok := m["priority"]; ok {
		if s.Priority, err = WholeNumber("priority", v); err != nil {
			return Intent{}, err
		}
	}
	if v, ok := m["iterations"]; ok {
		if s.Iterations, err = WholeNumber("iterations", v); err != nil {
			return Intent{}, err
		}
	}
	for _, f := range []struct {
		field string
		dst   *string
	}{{"vc", &s.VC}, {"class", &s.Class}, {"grace_period", &s.GracePeriod}, {"checkpoint_signal", &s.CheckpointSignal},
		{"app", &s.App}, {"model", &s.Model}} {
		field, dst := f.field, f.dst
		v, ok := m[field]
		if !ok {
			continue
		}
		str, isStr := v.(string)
		if !isStr {
			return Intent{}, &FieldError{field, v, "must be a string"}
		}
		*dst = str
	}
	return s.Intent()
}

// CanonicalSignal upper-cases a signal name and adds "SIG" when it is
// missing: "term" and "SIGTERM" are both "SIGTERM".
func CanonicalSignal(name string) string {
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	return n
}

func isCheckpointSignal(canonical string) bool {
	for _, s := range CheckpointSignals {
		if s == canonical {
			return true
		}
	}
	return false
}

func checkpointSignalRule() string {
	return "must be a signal the workload can trap: one of " + strings.Join(CheckpointSignals, ", ")
}

func known(field string) bool {
	for _, f := range Fields {
		if f == field {
			return true
		}
	}
	return false
}

// WholeNumber reads a stanza number, which HCL and JSON may deliver as a
// float, int or uint; a fraction or a value out of int32 range is a
// FieldError naming the field.
func WholeNumber(field string, v any) (int, error) {
	var f float64
	switch n := v.(type) {
	case int:
		return n, nil
	case int64:
		f = float64(n)
	case float64:
		f = n
	case uint64:
		f = float64(n)
	default:
		return 0, &FieldError{field, v, "must be a whole number"}
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<31 {
		return 0, &FieldError{field, v, "must be a whole number"}
	}
	return int(f), nil
}

// MetaPrefix starts the meta keys that carry the stanza for tasks of other
// drivers (docker, exec, raw_exec): "themis.gpus" = "2", "themis.vc" =
// "research", ... in the task's or its group's meta (the task's win).
const MetaPrefix = BlockName + "."

// reservedMeta are keys under MetaPrefix that the planner itself writes,
// not stanza fields.
var reservedMeta = map[string]bool{MetaRestartCount: true, MetaLease: true, MetaLeaseOld: true, MetaSuspended: true, MetaCount: true, MetaGang: true, MetaHeld: true}

// FromMeta finds the stanza in meta keys (group meta overlaid by task
// meta) and validates it with the same rules and errors as the block.
// found is false when no key names a stanza field; a key under
// MetaPrefix that names no field is an unknown-field error. Numbers are
// given as strings, as Nomad's meta holds them.
func FromMeta(meta map[string]string) (in Intent, found bool, err error) {
	m := map[string]any{}
	for k, v := range meta {
		field, ok := metaField(k)
		if !ok {
			continue
		}
		switch field {
		case "gpus", "priority", "iterations":
			f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if perr != nil {
				return Intent{}, true, &FieldError{field, v, "must be a whole number"}
			}
			m[field] = f
		default:
			m[field] = v
		}
	}
	if len(m) == 0 {
		return Intent{}, false, nil
	}
	in, err = fromMap(m)
	return in, true, err
}

// HasMetaStanza reports whether meta holds a stanza key (FromMeta's found),
// without parsing it.
func HasMetaStanza(meta map[string]string) bool {
	for k := range meta {
		if _, ok := metaField(k); ok {
			return true
		}
	}
	return false
}

// metaField is the stanza field a meta key names; ok is false for another
// namespace's key or one the planner writes (themis.lease, ...).
func metaField(key string) (field string, ok bool) {
	field, ok = strings.CutPrefix(key, MetaPrefix)
	if !ok || reservedMeta[key] || strings.Contains(field, ".") {
		return "", false
	}
	return field, true
}
