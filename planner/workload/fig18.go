package workload

import (
	"fmt"
	"math"
	"strconv"

	"github.com/themis-nomad/themis/planner/trace"
)

// FormatThemisFig18 is the Format of ThemisFig18's trace.
const FormatThemisFig18 = "themis-fig18"

// ThemisFig18 is the workload of the Themis paper's strategic-lying
// experiment (section 6.3, Figure 18): "8 identical apps with equivalent
// placement preferences", run on cluster.Preset("themis-fig18") (one 8-GPU
// machine, the rest 2-GPU machines, 64 GPUs). The paper gives neither the
// apps' jobs nor their durations, only that "the most preferred allocation
// in this cluster is the 8 GPU machine". Here each app arrives at 0 with
// jobs jobs, all submitted at once, each an 8-GPU gang of VGG16 (the most
// placement-sensitive model class: 1.2x across machines) running dur
// seconds at full speed. The themis sim default is one job of 4 hours per
// app: each app then wants one 8-GPU gang, the cluster holds all eight at
// once, and what they compete for is the 8-GPU machine, as in the paper.
// With several jobs per app, each app wants several gangs at once and the
// apps also compete for GPUs. Apps are "app-0001".. "app-0008", jobs
// "<app>-j<k>".
func ThemisFig18(jobs int, dur float64) (*trace.Trace, error) {
	if jobs < 1 || jobs > MaxThemisAppJobs || !(dur > 0) || math.IsInf(dur, 0) {
		return nil, fmt.Errorf("themis fig18 workload: %d jobs of %v s: want 1 to %d jobs per app of a positive finite duration", jobs, dur, MaxThemisAppJobs)
	}
	var out []trace.Job
	for a := 1; a <= 8; a++ {
		app := fmt.Sprintf("app-%04d", a)
		for k := range jobs {
			out = append(out, trace.Job{Line: len(out) + 2, ID: app + "-j" + strconv.Itoa(k), Duration: dur, GPUs: 8,
				Model: "vgg16", App: app})
		}
	}
	return &trace.Trace{Name: "themis-fig18", Format: FormatThemisFig18, Jobs: out}, nil
}
