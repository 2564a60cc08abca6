package report

import (
	"fmt"
	"strings"
)

// lostWorkMarkdown writes comparison.md's table of the work lost to
// preemption, when some run modelled periodic checkpoints
// (sim.checkpoint_every > 0): per policy the preemptions, the GPU-seconds
// of work lost, the average per preemption, and the ratio to the
// reference's loss.
func lostWorkMarkdown(b *strings.Builder, c Comparison) {
	var ref *Num
	some := false
	for _, p := range c.Policies {
		if p.Metrics.LostWork != nil {
			some = true
		}
		if p.Policy == c.Reference {
			ref = p.Metrics.LostWork
		}
	}
	if !some {
		return
	}
	b.WriteString("\n## Work lost to preemption\n\n")
	b.WriteString("GPU-seconds of work lost to preemption: each victim's execution since its newest periodic " +
		"checkpoint, times its GPUs (sim.checkpoint_every); ratio = policy / reference.\n\n")
	b.WriteString("| Policy | Preemptions | Lost work (GPU-s) | Per preemption (GPU-s) | Ratio |\n")
	b.WriteString("|---|---:|---:|---:|---:|\n")
	for _, p := range c.Policies {
		lost, per, r := undefined(), undefined(), undefined()
		if l := p.Metrics.LostWork; l != nil {
			lost = *l
			if p.Metrics.Preemptions > 0 {
				per = *l / p.Metrics.Preemptions
			}
			if ref != nil {
				r = ratio(*l, *ref)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", mdCell(p.Policy), mdNum(p.Metrics.Preemptions), mdNum(lost), mdNum(per), mdNum(r))
	}
}
