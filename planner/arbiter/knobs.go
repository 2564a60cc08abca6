package arbiter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// FromKnobs builds a policy from themis.f, themis.lease, themis.lie,
// themis.lie_remaining, themis.filter_remaining, themis.filter_estimate,
// themis.early_end, themis.early_end_rho and themis.early_end_victim (the
// last three spelt themis.revoke, themis.revoke_rho and
// themis.revoke_victim before #34: renamed).
func FromKnobs(k core.Knobs) (*Policy, error) {
	f, err := k.Float("themis.f", auction.DefaultFairness)
	if err != nil {
		return nil, err
	}
	if !(f >= 0 && f <= 1) {
		return nil, fmt.Errorf("themis.f = %v: want a number in [0, 1]", f)
	}
	lease := auction.DefaultLease
	if k.Has("themis.lease") {
		v := k.String("themis.lease", "")
		if d, err := time.ParseDuration(v); err == nil {
			lease = d.Seconds()
		} else if s, err := strconv.ParseFloat(v, 64); err == nil {
			lease = s
		} else {
			return nil, fmt.Errorf("themis.lease = %q: want a duration (10m) or seconds", v)
		}
		if !(lease > 0) || math.IsInf(lease, 0) {
			return nil, fmt.Errorf("themis.lease = %q: want a positive duration", v)
		}
	}
	lie, err := lies(k, "themis.lie")
	if err != nil {
		return nil, err
	}
	lieRemaining, err := lies(k, "themis.lie_remaining")
	if err != nil {
		return nil, err
	}
	p := New(f, lease, lie)
	if len(lieRemaining) > 0 {
		p.LieRemaining = lieRemaining
	}
	switch v := k.String("themis.filter_remaining", FilterReported); v {
	case FilterReported:
	case FilterTruth, FilterAsRun:
		p.FilterRemaining = v
	default:
		return nil, fmt.Errorf("themis.filter_remaining = %q: want %s, %s or %s", v, FilterReported, FilterTruth, FilterAsRun)
	}
	switch v := k.String("themis.filter_estimate", EstimateCurrent); v {
	case EstimateCurrent:
	case EstimateWhole, EstimateFluid:
		p.FilterEstimate = v
	default:
		return nil, fmt.Errorf("themis.filter_estimate = %q: want %s, %s or %s", v, EstimateCurrent, EstimateWhole, EstimateFluid)
	}
	onKey, err := renamed(k, "themis.early_end", "themis.revoke")
	if err != nil {
		return nil, err
	}
	switch v := k.String(onKey, "on"); v {
	case "on":
		p.EarlyEnd = true
	case "off":
	default:
		return nil, fmt.Errorf("%s = %q: want on or off", onKey, v)
	}
	rhoKey, err := renamed(k, "themis.early_end_rho", "themis.revoke_rho")
	if err != nil {
		return nil, err
	}
	if p.EarlyEndRho, err = k.Float(rhoKey, 1); err != nil {
		return nil, err
	}
	if !(p.EarlyEndRho > 0 && p.EarlyEndRho <= 1) {
		return nil, fmt.Errorf("%s = %v: want a number in (0, 1]", rhoKey, p.EarlyEndRho)
	}
	victimKey, err := renamed(k, "themis.early_end_victim", "themis.revoke_victim")
	if err != nil {
		return nil, err
	}
	switch v := k.String(victimKey, "1"); v {
	case "1":
	case "target":
		p.EarlyEndVictim = p.EarlyEndRho
	default:
		return nil, fmt.Errorf("%s = %q: want 1 or target", victimKey, v)
	}
	return p, nil
}

// renamed is the key a renamed knob is read under: name, or old (its
// spelling before #34, still accepted) when only that one is set. Setting
// both is an error naming both, whatever their values.
func renamed(k core.Knobs, name, old string) (string, error) {
	hasNew, hasOld := k.Has(name), k.Has(old)
	switch {
	case hasNew && hasOld:
		return "", fmt.Errorf("%s and %s are one knob (%s is its old spelling): set only %s", name, old, old, name)
	case hasOld:
		return old, nil
	}
	return name, nil
}

// lies parses a lie knob: APP:+X% or APP:-X%, comma-separated, into
// factors 1 + X/100.
func lies(k core.Knobs, name string) (map[string]float64, error) {
	lie := map[string]float64{}
	if !k.Has(name) {
		return lie, nil
	}
	for _, part := range strings.Split(k.String(name, ""), ",") {
		app, pct, ok := strings.Cut(strings.TrimSpace(part), ":")
		x, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(pct), "+"), "%"), 64)
		if !ok || app == "" || err != nil || !(x > -100) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s = %q: want APP:+X%% or APP:-X%% (a finite X, below 100 when negative)", name, part)
		}
		lie[app] = 1 + x/100
	}
	return lie, nil
}
