package core

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Knobs are a policy's settings as key=value strings (`--set k=v`). Getters
// mark keys as used, so a misspelt knob is an error rather than ignored.
type Knobs struct {
	values map[string]string
	used   map[string]bool
}

// ParseKnobs reads "key=value" settings; a later one overrides an earlier.
func ParseKnobs(settings []string) (Knobs, error) {
	k := Knobs{values: map[string]string{}, used: map[string]bool{}}
	for _, s := range settings {
		key, val, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return Knobs{}, fmt.Errorf("setting %q: want key=value", s)
		}
		k.values[key] = strings.TrimSpace(val)
	}
	return k, nil
}

// With returns knobs that add or override settings ("key=value") to k's.
// They share k's record of which knobs were used, so that k.Unused sees
// what the derived knobs' users asked for (a sweep's variants).
func (k Knobs) With(settings ...string) (Knobs, error) {
	extra, err := ParseKnobs(settings)
	if err != nil {
		return Knobs{}, err
	}
	out := Knobs{values: make(map[string]string, len(k.values)+len(extra.values)), used: k.used}
	if out.used == nil {
		out.used = map[string]bool{}
	}
	for key, v := range k.values {
		out.values[key] = v
	}
	for key, v := range extra.values {
		out.values[key] = v
	}
	return out, nil
}

// Has reports whether a knob was set (and marks it used).
func (k Knobs) Has(key string) bool {
	if k.values == nil {
		return false
	}
	_, ok := k.values[key]
	if ok {
		k.used[key] = true
	}
	return ok
}

// String returns a knob or def.
func (k Knobs) String(key, def string) string {
	if !k.Has(key) {
		return def
	}
	return k.values[key]
}

// Float returns a number knob ("inf" allowed) or def.
func (k Knobs) Float(key string, def float64) (float64, error) {
	if !k.Has(key) {
		return def, nil
	}
	v, err := strconv.ParseFloat(k.values[key], 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("%s = %q: not a number", key, k.values[key])
	}
	return v, nil
}

// Int returns a whole-number knob or def.
func (k Knobs) Int(key string, def int) (int, error) {
	if !k.Has(key) {
		return def, nil
	}
	v, err := strconv.Atoi(k.values[key])
	if err != nil {
		return 0, fmt.Errorf("%s = %q: not a whole number", key, k.values[key])
	}
	return v, nil
}

func errNegative(what string) error { return fmt.Errorf("%s must not be negative", what) }

// Seconds returns a list of durations in seconds ("3200s,7200" or "1h"),
// strictly increasing and positive, or def.
func (k Knobs) Seconds(key string, def []float64) ([]float64, error) {
	if !k.Has(key) {
		return def, nil
	}
	var out []float64
	for _, part := range strings.Split(k.values[key], ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := strconv.ParseFloat(part, 64)
		if err != nil {
			d, derr := time.ParseDuration(part)
			if derr != nil {
				return nil, fmt.Errorf("%s = %q: %q is neither seconds nor a duration", key, k.values[key], part)
			}
			v = d.Seconds()
		}
		if v <= 0 || (len(out) > 0 && v <= out[len(out)-1]) {
			return nil, fmt.Errorf("%s = %q: thresholds must be positive and increasing", key, k.values[key])
		}
		out = append(out, v)
	}
	return out, nil
}

// KnobNamespaces are the prefixes of known knobs ("tiresias.queues"): a
// comparison run passes one set of knobs to several policies, and each
// ignores the namespaces of the others.
var KnobNamespaces = []string{"sim", "tiresias", "fitgpp", "workload", "themis", "preempt"}

// Unused is an error naming the knobs nothing asked for, except those in a
// known namespace other than own (another policy's, or the simulator's).
func (k Knobs) Unused(own ...string) error {
	var left []string
	for key := range k.values {
		if k.used[key] {
			continue
		}
		ns, _, _ := strings.Cut(key, ".")
		if slices.Contains(KnobNamespaces, ns) && !slices.Contains(own, ns) {
			continue
		}
		left = append(left, key)
	}
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	return fmt.Errorf("unknown setting(s) %s", strings.Join(left, ", "))
}
