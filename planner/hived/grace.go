package hived

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// A VC's max_grace_period bounds the grace period its jobs may ask for
// (themis.grace_period): how long one job may make a preemptor wait while
// it checkpoints. Nomad's own bound is the clients' max_kill_timeout (30
// minutes by default), so without this one job could hold every preemptor
// of its VC back 30 minutes. A job asking for more is rejected naming the
// rule (AdmitGrace), and a job already running under a larger grace (a
// reload lowered the bound) is revoked with the bound as its deadline
// (GraceBound), after which Nomad kills it.
//
//	vc "trial" {
//	  max_grace_period = "2m"
//	}

// GraceBound is the longest grace period virtual cluster vc allows its
// jobs (0: no bound but Nomad's), and where the rule is written.
func (cfg *Config) GraceBound(vc string) (time.Duration, string) {
	if cfg == nil {
		return 0, ""
	}
	i := slices.IndexFunc(cfg.VCs, func(v VCConfig) bool { return v.Name == vc })
	if i < 0 {
		return 0, ""
	}
	return cfg.VCs[i].MaxGracePeriod, cfg.VCs[i].gracePos
}

// AdmitGrace checks a job's grace period against its virtual cluster's
// bound: nil, or an error naming the field and the rule.
func (cfg *Config) AdmitGrace(vc string, grace time.Duration) error {
	max, pos := cfg.GraceBound(vc)
	if max > 0 && grace > max {
		return fmt.Errorf("themis.grace_period: %s is longer than virtual cluster %q lets a job make a preemptor wait (max_grace_period = %s, %s): ask for at most %s",
			grace, vc, max, cfg.where(pos), max)
	}
	return nil
}

// maxGrace parses a vc block's max_grace_period into v.
func (p *parser) maxGrace(v *VCConfig, attrs hcl.Attributes) bool {
	attr, set := attrs["max_grace_period"]
	if !set {
		return true
	}
	v.gracePos = rangeString(attr.Expr.Range())
	var s string
	if !p.Decode(attr, &s) {
		return false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		p.Errorf(attr.Expr.Range(), "Invalid max_grace_period", "vc %q: max_grace_period: %q must be a positive duration such as \"2m\"", v.Name, s)
		return false
	}
	v.MaxGracePeriod = d
	return true
}

// formatGrace writes v's max_grace_period into its block.
func formatGrace(vb *hclwrite.Body, v VCConfig) {
	if v.MaxGracePeriod > 0 {
		vb.SetAttributeValue("max_grace_period", cty.StringVal(v.MaxGracePeriod.String()))
	}
}
