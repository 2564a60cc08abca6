package spec

import (
	"strings"
	"testing"
	"time"
)

func TestFromTaskConfig(t *testing.T) {
	block := func(m map[string]any) map[string]any {
		return map[string]any{"command": "x", BlockName: []any{m}}
	}
	cases := []struct {
		name    string
		config  map[string]any
		found   bool
		want    Intent
		wantErr string
	}{
		{"no stanza", map[string]any{"command": "x"}, false, Intent{}, ""},
		{"defaults", block(map[string]any{"gpus": 2.0}), true,
			Intent{GPUs: 2, VC: "default", Class: ClassBestEffort, GracePeriod: 30 * time.Second, CheckpointSignal: "SIGTERM"}, ""},
		{"all fields", block(map[string]any{"gpus": 4, "vc": "vision", "class": "te", "priority": -1.0, "grace_period": "2m", "checkpoint_signal": "SIGUSR1"}), true,
			Intent{GPUs: 4, VC: "vision", Class: ClassTrialAndError, Priority: -1, GracePeriod: 2 * time.Minute, CheckpointSignal: "SIGUSR1"}, ""},
		{"signal without SIG, lower case", block(map[string]any{"gpus": 1, "checkpoint_signal": "int"}), true,
			Intent{GPUs: 1, VC: "default", Class: ClassBestEffort, GracePeriod: 30 * time.Second, CheckpointSignal: "SIGINT"}, ""},
		{"map instead of list", map[string]any{BlockName: map[string]any{"gpus": 1}}, true,
			Intent{GPUs: 1, VC: "default", Class: ClassBestEffort, GracePeriod: 30 * time.Second, CheckpointSignal: "SIGTERM"}, ""},
		{"gpus missing", block(map[string]any{"vc": "a"}), true, Intent{}, "themis.gpus: is required"},
		{"gpus a string", block(map[string]any{"gpus": "two"}), true, Intent{}, `themis.gpus: must be a whole number, got "two"`},
		{"gpus fractional", block(map[string]any{"gpus": 1.5}), true, Intent{}, "themis.gpus: must be a whole number, got 1.5"},
		{"gpus zero", block(map[string]any{"gpus": 0}), true, Intent{}, "themis.gpus: must be a whole number from 1 to 1024, got 0"},
		{"gpus huge", block(map[string]any{"gpus": 1e12}), true, Intent{}, "themis.gpus: must be a whole number"},
		{"bad vc", block(map[string]any{"gpus": 1, "vc": "Team A"}), true, Intent{}, `themis.vc: must be a virtual cluster name`},
		{"vc not a string", block(map[string]any{"gpus": 1, "vc": 3}), true, Intent{}, "themis.vc: must be a string, got 3"},
		{"bad class", block(map[string]any{"gpus": 1, "class": "urgent"}), true, Intent{}, `themis.class: must be "be" (best effort) or "te"`},
		{"bad priority", block(map[string]any{"gpus": 1, "priority": -2}), true, Intent{}, "themis.priority: must be a whole number from -1"},
		{"bad grace", block(map[string]any{"gpus": 1, "grace_period": "soon"}), true, Intent{}, `themis.grace_period: must be a duration`},
		{"negative grace", block(map[string]any{"gpus": 1, "grace_period": "-1s"}), true, Intent{}, "themis.grace_period: must be between 0s and 24h0m0s"},
		{"SIGKILL cannot be trapped", block(map[string]any{"gpus": 1, "checkpoint_signal": "SIGKILL"}), true, Intent{},
			`themis.checkpoint_signal: must be a signal the workload can trap: one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, got "SIGKILL"`},
		{"unknown signal", block(map[string]any{"gpus": 1, "checkpoint_signal": "SIGBOGUS"}), true, Intent{}, `themis.checkpoint_signal: must be a signal the workload can trap`},
		{"signal not a string", block(map[string]any{"gpus": 1, "checkpoint_signal": 15}), true, Intent{}, "themis.checkpoint_signal: must be a string, got 15"},
		{"unknown field", block(map[string]any{"gpus": 1, "gpu": 2}), true, Intent{}, "themis.gpu: unknown field; the stanza accepts gpus, vc, class, priority, grace_period, checkpoint_signal, app, iterations, model"},
		{"app, iterations and model", block(map[string]any{"gpus": 1, "app": "sweep-lr.v2", "iterations": 5000.0, "model": "resnet50"}), true,
			Intent{GPUs: 1, VC: "default", Class: ClassBestEffort, GracePeriod: 30 * time.Second, CheckpointSignal: "SIGTERM", App: "sweep-lr.v2", Iterations: 5000, Model: "resnet50"}, ""},
		{"bad app", block(map[string]any{"gpus": 1, "app": "my app"}), true, Intent{}, `themis.app: must be an app name: letters, digits, '.', '-' and '_', at most 128 characters, got "my app"`},
		{"app not a string", block(map[string]any{"gpus": 1, "app": 7}), true, Intent{}, "themis.app: must be a string, got 7"},
		{"iterations fractional", block(map[string]any{"gpus": 1, "iterations": 10.5}), true, Intent{}, "themis.iterations: must be a whole number, got 10.5"},
		{"iterations negative", block(map[string]any{"gpus": 1, "iterations": -3}), true, Intent{}, "themis.iterations: must be a whole number from 0 (not said) to 2147483648, got -3"},
		{"bad model", block(map[string]any{"gpus": 1, "model": "res net"}), true, Intent{}, `themis.model: must be a model name such as "resnet50"`},
		{"two blocks", map[string]any{BlockName: []any{map[string]any{"gpus": 1}, map[string]any{"gpus": 1}}}, true, Intent{}, `exactly one "themis" block`},
		{"not a block", map[string]any{BlockName: "gpus=1"}, true, Intent{}, "themis: must be a block"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := FromTaskConfig(tc.config)
			if found != tc.found {
				t.Fatalf("found = %v, want %v", found, tc.found)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStanzaIntentMatchesMap(t *testing.T) {
	// The driver's decoded struct and the planner's map reading agree.
	s := Stanza{GPUs: 3, Class: "te", GracePeriod: "45s", CheckpointSignal: "usr2", App: "sweep", Iterations: 900, Model: "bert"}
	a, err := s.Intent()
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := FromTaskConfig(map[string]any{BlockName: []any{map[string]any{"gpus": 3.0, "class": "te", "grace_period": "45s", "checkpoint_signal": "SIGUSR2", "app": "sweep", "iterations": 900, "model": "bert"}}})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("struct %+v != map %+v", a, b)
	}
}

func TestValidateCheckpointSignal(t *testing.T) {
	in := Intent{GPUs: 1, VC: "default", Class: ClassBestEffort, GracePeriod: time.Second, CheckpointSignal: "SIGSTOP"}
	err := in.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "themis.checkpoint_signal: ") {
		t.Fatalf("Validate of SIGSTOP: %v, want a themis.checkpoint_signal error", err)
	}
	in.CheckpointSignal = "SIGTERM"
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
}

func FuzzFromTaskConfig(f *testing.F) {
	f.Add("gpus", "2", "vc", "default", 1.0)
	f.Add("gpus", "", "grace_period", "10m", -1.0)
	f.Add("class", "te", "priority", "x", 1e300)
	f.Add("checkpoint_signal", "SIGUSR1", "grace_period", "1m", 4.0)
	f.Add("checkpoint_signal", "kill", "vc", "a", 1.0)
	f.Add("checkpoint_signal", "", "class", "be", 2.0)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, n float64) {
		m := map[string]any{k1: v1, k2: v2, "gpus": n}
		in, _, err := FromTaskConfig(map[string]any{BlockName: []any{m}})
		if err == nil {
			if vErr := in.Validate(); vErr != nil {
				t.Fatalf("accepted an invalid intent %+v: %v", in, vErr)
			}
			return
		}
		if !strings.HasPrefix(err.Error(), BlockName) {
			t.Fatalf("error does not name the stanza: %v", err)
		}
	})
}

func TestFromMeta(t *testing.T) {
	in, found, err := FromMeta(map[string]string{"themis.gpus": "4", "themis.class": "te", "themis.grace_period": "1m",
		"themis.restart_count": "2", "themis.lease.x": "ignored", "owner": "ml"})
	if err != nil || !found || in.GPUs != 4 || in.Class != ClassTrialAndError || in.GracePeriod != time.Minute {
		t.Fatalf("FromMeta = %+v, %v, %v", in, found, err)
	}
	if _, found, _ := FromMeta(map[string]string{"owner": "ml", "themis.restart_count": "1"}); found {
		t.Fatal("meta without stanza fields found a stanza")
	}
	// The planner's keys, the lease ID's in both spellings (themis.lease
	// before #34), are no stanza fields and no unknown ones either.
	for _, k := range []string{MetaRestartCount, MetaLease, MetaLeaseOld, MetaSuspended, MetaCount, MetaGang} {
		if _, found, err := FromMeta(map[string]string{"owner": "ml", k: "L"}); found || err != nil {
			t.Errorf("meta %q: found %v, err %v; want no stanza and no error", k, found, err)
		}
	}
	for meta, want := range map[string]string{
		"themis.gpus=1.5":    "themis.gpus: must be a whole number, got 1.5",
		"themis.gpus=x":      `themis.gpus: must be a whole number, got "x"`,
		"themis.priority=-9": "themis.priority: must be a whole number from -1",
		"themis.gpu=2":       "themis.gpu: unknown field",
	} {
		k, v, _ := strings.Cut(meta, "=")
		m := map[string]string{k: v}
		if k != "themis.gpus" {
			m["themis.gpus"] = "1"
		}
		if _, _, err := FromMeta(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", meta, err, want)
		}
	}
}

func FuzzFromMeta(f *testing.F) {
	f.Add("themis.gpus", "2", "themis.vc", "default")
	f.Add("themis.gpus", "1e3", "themis.grace_period", "10m")
	f.Add("themis.iterations", "-1", "themis.app", "a b")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		in, found, err := FromMeta(map[string]string{k1: v1, k2: v2})
		if err == nil && found {
			if verr := in.Validate(); verr != nil {
				t.Fatalf("FromMeta accepted an invalid intent %+v: %v", in, verr)
			}
		}
	})
}
