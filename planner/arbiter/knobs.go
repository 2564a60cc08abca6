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
// themis.lie_remaining, themis.filter_remaining, themis.revoke,
// themis.revoke_rho and themis.revoke_victim.
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
	switch v := k.String("themis.revoke", "on"); v {
	case "on":
		p.Revoke = true
	case "off":
	default:
		return nil, fmt.Errorf("themis.revoke = %q: want on or off", v)
	}
	if p.RevokeRho, err = k.Float("themis.revoke_rho", 1); err != nil {
		return nil, err
	}
	if !(p.RevokeRho > 0 && p.RevokeRho <= 1) {
		return nil, fmt.Errorf("themis.revoke_rho = %v: want a number in (0, 1]", p.RevokeRho)
	}
	switch v := k.String("themis.revoke_victim", "1"); v {
	case "1":
	case "target":
		p.RevokeVictim = p.RevokeRho
	default:
		return nil, fmt.Errorf("themis.revoke_victim = %q: want 1 or target", v)
	}
	return p, nil
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
