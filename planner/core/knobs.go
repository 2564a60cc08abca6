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
	// asked records every key a getter asked for, set or not: the knobs
	// that exist are those their owners read, so a misspelt one is
	// matched against them (Unused's "did you mean") and no list of
	// namespaces is kept here.
	asked map[string]bool
	// inherit, for Scoped knobs, is the parent's record of use, where the
	// reads of the keys the scope does not override (own) are recorded too.
	inherit, own map[string]bool
}

// ParseKnobs reads "key=value" settings; a later one overrides an earlier.
func ParseKnobs(settings []string) (Knobs, error) {
	k := Knobs{values: map[string]string{}, used: map[string]bool{}, asked: map[string]bool{}}
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
	out := Knobs{values: make(map[string]string, len(k.values)+len(extra.values)), used: k.used, asked: k.asked}
	if out.used == nil {
		out.used = map[string]bool{}
	}
	if out.asked == nil {
		out.asked = map[string]bool{}
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
	if k.asked != nil {
		k.asked[key] = true
	}
	if k.values == nil {
		return false
	}
	_, ok := k.values[key]
	if ok {
		k.used[key] = true
		if k.inherit != nil && !k.own[key] {
			k.inherit[key] = true
		}
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

// Scoped returns knobs that override k's settings with settings (a virtual
// cluster's own knobs over the stack's), with a record of use of their own,
// so that UnusedOf(the overriding keys) says which of them the scope's
// owner never read; reads of the keys they inherit are recorded in k too.
// Asked keys are shared with k, for Unused's suggestions.
func (k Knobs) Scoped(settings map[string]string) Knobs {
	out := Knobs{values: make(map[string]string, len(k.values)+len(settings)), used: map[string]bool{}, asked: k.asked,
		inherit: k.used, own: map[string]bool{}}
	if out.asked == nil {
		out.asked = map[string]bool{}
	}
	if out.inherit == nil {
		out.inherit = map[string]bool{}
	}
	for key := range settings {
		out.own[key] = true
	}
	for key, v := range k.values {
		out.values[key] = v
	}
	for key, v := range settings {
		out.values[key] = v
	}
	return out
}

// Set returns the keys that were set, sorted.
func (k Knobs) Set() []string {
	keys := make([]string, 0, len(k.values))
	for key := range k.values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// Unused is an error naming every knob that was set and that nothing read,
// each with the nearest knob that was read, if one is near ("did you
// mean"). A run checks it last, once everything that owns knobs (policies,
// the stack, the simulator, the workload generator) has read its own: a
// comparison run passes one set of knobs to several policies, and each
// reads only its own.
func (k Knobs) Unused() error {
	var left []string
	for key := range k.values {
		if !k.used[key] {
			left = append(left, key)
		}
	}
	return k.unknown(left)
}

// UnusedIn is Unused restricted to the knobs of the given namespaces (the
// part before the first "."): what a policy checks once it read its own.
func (k Knobs) UnusedIn(namespaces ...string) error {
	var left []string
	for key := range k.values {
		ns, _, _ := strings.Cut(key, ".")
		if !k.used[key] && slices.Contains(namespaces, ns) {
			left = append(left, key)
		}
	}
	return k.unknown(left)
}

// UnusedOf is Unused restricted to keys.
func (k Knobs) UnusedOf(keys []string) error {
	var left []string
	for _, key := range keys {
		if _, set := k.values[key]; set && !k.used[key] {
			left = append(left, key)
		}
	}
	return k.unknown(left)
}

func (k Knobs) unknown(left []string) error {
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	for i, key := range left {
		if near := k.nearest(key); near != "" {
			left[i] = fmt.Sprintf("%s (did you mean %s?)", key, near)
		}
	}
	return fmt.Errorf("unknown setting(s) %s", strings.Join(left, ", "))
}

// nearest is the asked-for knob closest to key by edit distance, if within
// a third of key's length (at most 3 edits); ties go to the first by name.
func (k Knobs) nearest(key string) string {
	best, bestD := "", min(3, len(key)/3)+1
	for a := range k.asked {
		if a == key {
			continue
		}
		if d := editDistance(key, a); d < bestD || d == bestD && best != "" && a < best {
			best, bestD = a, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
