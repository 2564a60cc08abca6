package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/themis-nomad/themis/planner/spec"
	"github.com/themis-nomad/themis/planner/trace"
)

// FormatFitGpp is the Format of traces FitGpp generates.
const FormatFitGpp = "fitgpp"

// The arrival processes FitGpp offers (FitGppConfig.Arrivals).
const (
	// ArrivalsFIFO submits each job at the first moment the FIFO load L(t)
	// (see Summary.FIFOLoad) of a FIFO schedule of the jobs submitted so far
	// is below the target: the paper's "submitted at such a rate that the
	// cluster load would be kept at 2.0 if they were scheduled by FIFO".
	ArrivalsFIFO = "fifo"
	// ArrivalsPoisson submits jobs in a Poisson process whose rate makes the
	// offered load (OfferedLoad) equal the target.
	ArrivalsPoisson = "poisson"
)

// MaxJobs bounds FitGppConfig.Jobs (about 3 GB of trace.Job at the limit).
const MaxJobs = 1 << 24

// Node is the capacity of one node.
type Node struct {
	CPUs     float64
	MemoryGB float64
	GPUs     int
}

// Cluster is a cluster of identical nodes.
type Cluster struct {
	Nodes int
	Node  Node
}

// PaperCluster is the FitGpp evaluation's cluster (OpML'19, section 3): 84
// nodes of 32 CPUs, 256 GB RAM and 8 GPUs.
var PaperCluster = Cluster{Nodes: 84, Node: Node{CPUs: 32, MemoryGB: 256, GPUs: 8}}

// Validate checks that the cluster has nodes with positive, finite
// capacities.
func (c Cluster) Validate() error {
	n := c.Node
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("cluster: %d nodes, want at least 1", c.Nodes)
	case !(n.CPUs > 0) || math.IsInf(n.CPUs, 0):
		return fmt.Errorf("cluster: node CPUs %g, want a positive number", n.CPUs)
	case !(n.MemoryGB > 0) || math.IsInf(n.MemoryGB, 0):
		return fmt.Errorf("cluster: node memory %g GB, want a positive number", n.MemoryGB)
	case n.GPUs < 1:
		return fmt.Errorf("cluster: node GPUs %d, want at least 1", n.GPUs)
	}
	return nil
}

// capacity is the node's capacity as a resource vector.
func (n Node) capacity() resources { return resources{n.CPUs, n.MemoryGB, float64(n.GPUs)} }

// ClassParams are the distributions of one job class's execution time and
// requests (OpML'19, Appendix A: one truncated normal each, drawn
// independently). Duration is in seconds and continuous. CPUs, MemoryGB
// and GPUs are whole numbers: a draw is round(x) with x from the normal
// truncated to [Lo−½, Hi+½), Hi first lowered to the node's capacity, so
// every count from Lo to Hi gets the normal's mass around it and no request
// exceeds a node.
type ClassParams struct {
	Duration TruncNormal
	CPUs     TruncNormal
	MemoryGB TruncNormal
	GPUs     TruncNormal
}

// FitGppConfig parametrises FitGpp. Start from DefaultFitGppConfig: FitGpp
// fills in no defaults (a zero TEFraction means no TE jobs, a zero Load is
// an error) and validates every field.
type FitGppConfig struct {
	// Jobs is the number of jobs, 1 to MaxJobs (paper: 2^19).
	Jobs int
	// Seed makes the workload: the same config gives the same trace.
	Seed uint64
	// TEFraction is each job's probability of being a TE job (paper: 30%).
	TEFraction float64
	// Load is the target load (paper: 2.0); see Arrivals.
	Load float64
	// Arrivals is ArrivalsFIFO (the paper's reading, the default) or
	// ArrivalsPoisson.
	Arrivals string
	// Cluster is the cluster the load refers to and whose node bounds every
	// request (paper: PaperCluster).
	Cluster Cluster
	// TE and BE are the classes' distributions.
	TE, BE ClassParams
	// GracePeriod is the distribution of grace periods in seconds, the same
	// for both classes (the paper gives one).
	GracePeriod TruncNormal
	// VCs are the virtual clusters the jobs are spread over, in turn
	// (none: every job in trace.VCDefault).
	VCs []string
}

// Minutes and hours in seconds, for the parameter tables.
const (
	minute = 60.0
	hour   = 60 * minute
)

// DefaultFitGppConfig is the FitGpp paper's evaluation workload. What the
// paper states (OpML'19, section 3 and Appendix A): 2^19 jobs, 30% TE, FIFO
// load 2.0, 84 nodes x (32 CPUs, 256 GB, 8 GPUs), execution times from
// normals with mean 5 min (TE) and 30 min (BE) truncated at 30 min and 24 h,
// grace periods from a normal with mean 3 min truncated at 20 min. The paper
// gives no standard deviations, lower bounds or request distributions (its
// Figure 2 of trace statistics is not reproduced); docs/simulator.md, "The
// FitGpp workload", lists what this package chose and why.
func DefaultFitGppConfig() FitGppConfig {
	node := PaperCluster.Node
	return FitGppConfig{
		Jobs:       1 << 19,
		Seed:       1,
		TEFraction: 0.3,
		Load:       2.0,
		Arrivals:   ArrivalsFIFO,
		Cluster:    PaperCluster,
		TE: ClassParams{
			Duration: TruncNormal{Mean: 5 * minute, SD: 10 * minute, Lo: 1 * minute, Hi: 30 * minute},
			CPUs:     TruncNormal{Mean: 4, SD: 4, Lo: 1, Hi: node.CPUs},
			MemoryGB: TruncNormal{Mean: 16, SD: 16, Lo: 1, Hi: node.MemoryGB},
			GPUs:     TruncNormal{Mean: 1, SD: 1, Lo: 1, Hi: float64(node.GPUs)},
		},
		BE: ClassParams{
			Duration: TruncNormal{Mean: 30 * minute, SD: 60 * minute, Lo: 1 * minute, Hi: 24 * hour},
			CPUs:     TruncNormal{Mean: 12, SD: 12, Lo: 1, Hi: node.CPUs},
			MemoryGB: TruncNormal{Mean: 64, SD: 64, Lo: 1, Hi: node.MemoryGB},
			GPUs:     TruncNormal{Mean: 4, SD: 4, Lo: 1, Hi: float64(node.GPUs)},
		},
		GracePeriod: TruncNormal{Mean: 3 * minute, SD: 3 * minute, Lo: 0, Hi: 20 * minute},
	}
}

// classSamplers are one class's prepared distributions.
type classSamplers struct {
	duration        Sampler
	cpus, mem, gpus whole
}

// whole draws whole-number requests from [lo, hi].
type whole struct {
	s  Sampler // on [lo−½, hi+½)
	hi float64
}

// Sample rounds a draw to the nearest whole number, halves up; a draw of
// exactly hi+½ stays at hi.
func (w whole) Sample(r *rand.Rand) float64 {
	return min(math.Floor(w.s.Sample(r)+0.5), w.hi)
}

// Expected is the mean of the whole-number distribution.
func (w whole) Expected() float64 {
	lo := math.Ceil(w.s.lo) // the smallest count
	if w.s.sd == 0 {
		return w.s.mean
	}
	sum := 0.0
	for k := lo; k <= w.hi; k++ {
		sum += k * (w.s.CDF(k+0.5) - w.s.CDF(k-0.5))
	}
	return sum
}

// samplers validates the config and prepares its distributions.
func (cfg FitGppConfig) samplers() (te, be classSamplers, grace Sampler, err error) {
	switch {
	case cfg.Jobs < 1 || cfg.Jobs > MaxJobs:
		err = fmt.Errorf("jobs = %d: want a whole number from 1 to %d", cfg.Jobs, MaxJobs)
	case !(cfg.TEFraction >= 0 && cfg.TEFraction <= 1):
		err = fmt.Errorf("te_fraction = %g: want a number from 0 to 1", cfg.TEFraction)
	case !(cfg.Load > 0) || math.IsInf(cfg.Load, 0):
		err = fmt.Errorf("load = %g: want a positive number", cfg.Load)
	case cfg.Arrivals != ArrivalsFIFO && cfg.Arrivals != ArrivalsPoisson:
		err = fmt.Errorf("arrivals = %q: want %q or %q", cfg.Arrivals, ArrivalsFIFO, ArrivalsPoisson)
	}
	if err != nil {
		return
	}
	if err = cfg.Cluster.Validate(); err != nil {
		return
	}
	if te, err = cfg.TE.samplers(cfg.Cluster.Node); err != nil {
		err = fmt.Errorf("TE jobs: %w", err)
		return
	}
	if be, err = cfg.BE.samplers(cfg.Cluster.Node); err != nil {
		err = fmt.Errorf("BE jobs: %w", err)
		return
	}
	if grace, err = cfg.GracePeriod.Sampler(); err != nil {
		err = fmt.Errorf("grace period: %w", err)
		return
	}
	if cfg.GracePeriod.Lo < 0 {
		err = fmt.Errorf("grace period %v: lo must not be negative", cfg.GracePeriod)
	}
	return
}

// samplers validates one class's distributions against the node.
func (p ClassParams) samplers(node Node) (classSamplers, error) {
	var s classSamplers
	var err error
	if p.Duration.Lo < 0 {
		return s, fmt.Errorf("duration %v: lo must not be negative", p.Duration)
	}
	if s.duration, err = p.Duration.Sampler(); err != nil {
		return s, fmt.Errorf("duration: %w", err)
	}
	for _, r := range []struct {
		name string
		d    TruncNormal
		cap  float64
		min  float64
		dst  *whole
	}{
		{"CPUs", p.CPUs, node.CPUs, 0, &s.cpus},
		{"memory (GB)", p.MemoryGB, node.MemoryGB, 0, &s.mem},
		{"GPUs", p.GPUs, float64(node.GPUs), 1, &s.gpus},
	} {
		if *r.dst, err = wholeSampler(r.d, r.cap, r.min); err != nil {
			return s, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	return s, nil
}

// wholeSampler prepares a whole-number request: bounds are whole numbers,
// Lo >= min, Hi lowered to the node's capacity.
func wholeSampler(d TruncNormal, capacity, minimum float64) (whole, error) {
	if d.Lo != math.Trunc(d.Lo) || d.Lo < minimum {
		return whole{}, fmt.Errorf("%v: lo must be a whole number >= %g", d, minimum)
	}
	if !math.IsInf(d.Hi, 1) && d.Hi != math.Trunc(d.Hi) {
		return whole{}, fmt.Errorf("%v: hi must be a whole number (or +Inf)", d)
	}
	hi := min(d.Hi, math.Floor(capacity))
	if hi < d.Lo {
		return whole{}, fmt.Errorf("%v: a node holds only %g, below lo", d, capacity)
	}
	wide := TruncNormal{Mean: d.Mean, SD: d.SD, Lo: d.Lo - 0.5, Hi: hi + 0.5}
	if d.SD == 0 {
		if d.Mean != math.Trunc(d.Mean) {
			return whole{}, fmt.Errorf("%v: with standard deviation 0 the mean must be a whole number", d)
		}
		wide = TruncNormal{Mean: d.Mean, Lo: d.Lo, Hi: hi}
	}
	s, err := wide.Sampler()
	if err != nil {
		return whole{}, fmt.Errorf("%v (capped at the node's %g): %w", d, capacity, err)
	}
	return whole{s: s, hi: hi}, nil
}

// Random streams: each job attribute draws from its own stream, one draw
// per job, so changing one attribute's parameters (or the TE fraction)
// leaves the others' draws unchanged.
const (
	streamClass uint64 = iota + 0x6669746770700000 // "fitgpp"
	streamDuration
	streamCPUs
	streamMemory
	streamGPUs
	streamGrace
	streamArrivals
)

func stream(seed, id uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, id)) }

// FitGpp generates the FitGpp paper's synthetic workload (OpML'19,
// Appendix A): cfg.Jobs jobs, each TE with probability cfg.TEFraction, with
// execution time, CPUs, memory, GPUs and grace period drawn independently
// from the class's truncated normals, submitted by cfg.Arrivals so that the
// load is cfg.Load. The trace is deterministic for a config. Jobs are named
// "fitgpp-000001" on, in submission order; Line is the job's number + 1, as
// if the trace were a file with a header; job i is in VC cfg.VCs[i mod
// len(cfg.VCs)], or "default" when cfg.VCs is empty.
func FitGpp(cfg FitGppConfig) (*trace.Trace, error) {
	te, be, grace, err := cfg.samplers()
	if err != nil {
		return nil, fmt.Errorf("fitgpp workload: %w", err)
	}
	class := stream(cfg.Seed, streamClass)
	dur := stream(cfg.Seed, streamDuration)
	cpus := stream(cfg.Seed, streamCPUs)
	mem := stream(cfg.Seed, streamMemory)
	gpus := stream(cfg.Seed, streamGPUs)
	gp := stream(cfg.Seed, streamGrace)

	jobs := make([]trace.Job, cfg.Jobs)
	ids := jobIDs(cfg.Jobs)
	for i := range jobs {
		c, s := string(spec.ClassBestEffort), be
		if class.Float64() < cfg.TEFraction {
			c, s = string(spec.ClassTrialAndError), te
		}
		j := &jobs[i]
		j.Line = i + 2
		j.ID = ids[i]
		j.Duration = s.duration.Sample(dur)
		j.CPUs = s.cpus.Sample(cpus)
		j.MemoryGB = s.mem.Sample(mem)
		j.GPUs = int(s.gpus.Sample(gpus))
		j.VC = trace.VCDefault
		if len(cfg.VCs) > 0 {
			j.VC = cfg.VCs[i%len(cfg.VCs)]
		}
		j.Class = c
		j.GracePeriod = grace.Sample(gp)
	}
	switch cfg.Arrivals {
	case ArrivalsPoisson:
		poissonArrivals(jobs, cfg.Cluster, cfg.Load, stream(cfg.Seed, streamArrivals))
	default:
		if err := fifoArrivals(jobs, cfg.Cluster, cfg.Load); err != nil {
			return nil, fmt.Errorf("fitgpp workload: %w", err)
		}
	}
	return &trace.Trace{
		Name:   fmt.Sprintf("fitgpp-n%d-seed%d", cfg.Jobs, cfg.Seed),
		Format: FormatFitGpp,
		Jobs:   jobs,
	}, nil
}

// jobIDs are "fitgpp-000001" to "fitgpp-<n>", zero-padded to 6 digits or
// n's width. They share one backing string: one allocation, not n.
func jobIDs(n int) []string {
	width := max(6, len(strconv.Itoa(n)))
	const prefix = "fitgpp-"
	size := len(prefix) + width
	buf := make([]byte, 0, n*size)
	var num []byte
	for i := 1; i <= n; i++ {
		num = strconv.AppendInt(num[:0], int64(i), 10)
		buf = append(buf, prefix...)
		for range width - len(num) {
			buf = append(buf, '0')
		}
		buf = append(buf, num...)
	}
	all := string(buf)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = all[i*size : (i+1)*size]
	}
	return ids
}

// poissonArrivals sets Submit so that the offered load over the arrival
// window [0, last Submit] is exactly load: the window is
// S = max_r Σ_j D_jr·T_j / (C_r·load), and the arrival times are those of a
// Poisson process conditioned on its first and last arrivals at 0 and S
// (exponential gaps, scaled to sum to S).
func poissonArrivals(jobs []trace.Job, c Cluster, load float64, r *rand.Rand) {
	span := 0.0
	work := offeredWork(jobs)
	total := c.total()
	for k := range work {
		span = max(span, work[k]/(total[k]*load))
	}
	if len(jobs) < 2 {
		return
	}
	gaps := make([]float64, len(jobs)-1)
	sum := 0.0
	for i := range gaps {
		gaps[i] = r.ExpFloat64()
		sum += gaps[i]
	}
	t := 0.0
	for i := range gaps {
		t += gaps[i]
		jobs[i+1].Submit = span * (t / sum)
	}
	jobs[len(jobs)-1].Submit = span // exactly, whatever the rounding
}

// fifoArrivals sets Submit by running a FIFO schedule of the jobs and
// submitting the next job whenever the FIFO load drops below load.
func fifoArrivals(jobs []trace.Job, c Cluster, load float64) error {
	f := newFIFO(c, len(jobs))
	t, next := 0.0, 0
	for {
		for next < len(jobs) && f.load() < load {
			jobs[next].Submit = t
			f.admit(demandOf(jobs[next]), jobs[next].Duration)
			next++
		}
		f.startHeads(t)
		if next == len(jobs) {
			return nil
		}
		var ok bool
		if t, ok = f.completeNext(); !ok {
			return errors.New("FIFO arrivals: nothing runs and nothing can be submitted (a bug)")
		}
	}
}
