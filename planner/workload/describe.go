package workload

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/themis-nomad/themis/planner/spec"
	"github.com/themis-nomad/themis/planner/trace"
)

// Resources is an amount of each resource FitGpp schedules, or a load per
// resource.
type Resources struct {
	CPUs     float64
	MemoryGB float64
	GPUs     float64
}

func toResources(r resources) Resources { return Resources{r[0], r[1], r[2]} }

// ClassStats are the realised statistics of one job class.
type ClassStats struct {
	// Class is "te", "be", "" (unspecified) or, in Summary.All, "all".
	Class string
	Jobs  int
	// Fraction is Jobs over all jobs.
	Fraction float64
	// Means over the class's jobs; durations and grace periods in seconds.
	MeanDuration    float64
	MeanCPUs        float64
	MeanMemoryGB    float64
	MeanGPUs        float64
	MeanGracePeriod float64
	// OfferedLoad is the class's offered load on its most loaded resource
	// (see Summary.OfferedLoad).
	OfferedLoad float64
}

// Summary is what Describe reports about a trace on a cluster.
type Summary struct {
	Name    string
	Cluster Cluster
	Jobs    int
	// Span is the arrival window, last Submit − first Submit, in seconds.
	Span float64
	// Classes are the classes present, in the order te, be, unspecified.
	Classes []ClassStats
	All     ClassStats
	// Offered is the offered load per resource r:
	// Σ_j D_jr·T_j / (C_r·Span), the resource-seconds requested per second
	// of the arrival window over the cluster's capacity C_r (D_jr job j's
	// request, T_j its execution time). 0 when Span is 0.
	Offered Resources
	// OfferedLoad is the largest coordinate of Offered (the dominant
	// resource's): the load ArrivalsPoisson sets.
	OfferedLoad float64
	// FIFOLoad is the time average over the arrival window of the FIFO
	// load L(t) = max_r Σ_{j in system at t} D_jr / C_r, where the jobs in
	// the system are those submitted and not finished, running or queued,
	// in a strict FIFO schedule of the trace on the cluster: the load
	// ArrivalsFIFO keeps.
	FIFOLoad float64
	// FIFOUtilization is the same time average for the running jobs only.
	FIFOUtilization float64
}

// Describe computes a trace's realised statistics on a cluster, for
// reports. Every job must fit an empty node.
func Describe(t *trace.Trace, c Cluster) (Summary, error) {
	if err := c.Validate(); err != nil {
		return Summary{}, err
	}
	if t == nil || len(t.Jobs) == 0 {
		return Summary{}, errors.New("describe workload: the trace has no jobs")
	}
	node := c.Node.capacity()
	for _, j := range t.Jobs {
		if !node.fits(demandOf(j)) {
			return Summary{}, fmt.Errorf("describe workload: job %s requests %g CPUs, %g GB, %d GPUs, more than a node's %g CPUs, %g GB, %d GPUs",
				j.ID, j.CPUs, j.MemoryGB, j.GPUs, c.Node.CPUs, c.Node.MemoryGB, c.Node.GPUs)
		}
	}
	jobs := t.Jobs
	if !slices.IsSortedFunc(jobs, bySubmit) {
		jobs = slices.Clone(jobs)
		slices.SortStableFunc(jobs, bySubmit)
	}
	s := Summary{Name: t.Name, Cluster: c, Jobs: len(jobs), Span: jobs[len(jobs)-1].Submit - jobs[0].Submit}
	total := c.total()
	loadOf := func(w resources) (r resources) {
		if s.Span > 0 {
			for k := range w {
				r[k] = w[k] / (total[k] * s.Span)
			}
		}
		return r
	}
	var acc [4]accum // te, be, unspecified, all
	for i := range jobs {
		j := &jobs[i]
		k := 2
		switch j.Class {
		case string(spec.ClassTrialAndError):
			k = 0
		case string(spec.ClassBestEffort):
			k = 1
		}
		acc[k].add(j)
		acc[3].add(j)
	}
	for k, class := range []string{string(spec.ClassTrialAndError), string(spec.ClassBestEffort), ""} {
		if acc[k].jobs > 0 {
			s.Classes = append(s.Classes, acc[k].stats(class, len(jobs), loadOf))
		}
	}
	s.All = acc[3].stats("all", len(jobs), loadOf)
	offered := loadOf(acc[3].work)
	s.Offered = toResources(offered)
	s.OfferedLoad = max(offered[0], offered[1], offered[2])
	s.FIFOLoad, s.FIFOUtilization = replayFIFO(jobs, c, nil)
	return s, nil
}

func bySubmit(a, b trace.Job) int { return cmp.Compare(a.Submit, b.Submit) }

// accum sums one class's jobs.
type accum struct {
	jobs                             int
	duration, cpus, mem, gpus, grace float64
	work                             resources
}

func (a *accum) add(j *trace.Job) {
	a.jobs++
	a.duration += j.Duration
	a.cpus += j.CPUs
	a.mem += j.MemoryGB
	a.gpus += float64(j.GPUs)
	a.grace += j.GracePeriod
	d := demandOf(*j)
	for k := range d {
		a.work[k] += d[k] * j.Duration
	}
}

// stats are the class's statistics; all is the number of jobs of all
// classes.
func (a *accum) stats(class string, all int, loadOf func(resources) resources) ClassStats {
	n := float64(a.jobs)
	l := loadOf(a.work)
	return ClassStats{
		Class: class, Jobs: a.jobs, Fraction: n / float64(all),
		MeanDuration: a.duration / n, MeanCPUs: a.cpus / n, MeanMemoryGB: a.mem / n,
		MeanGPUs: a.gpus / n, MeanGracePeriod: a.grace / n,
		OfferedLoad: max(l[0], l[1], l[2]),
	}
}

// String is a short report: the loads, then a table of the classes.
func (s Summary) String() string {
	var b strings.Builder
	n := s.Cluster.Node
	fmt.Fprintf(&b, "%s: %d jobs submitted over %.1f h on %d nodes x (%g CPUs, %g GB, %d GPUs)\n",
		s.Name, s.Jobs, s.Span/hour, s.Cluster.Nodes, n.CPUs, n.MemoryGB, n.GPUs)
	fmt.Fprintf(&b, "FIFO load %.3f (FIFO utilization %.3f); offered load %.3f (%s %.3f, %s %.3f, %s %.3f)\n",
		s.FIFOLoad, s.FIFOUtilization, s.OfferedLoad,
		resourceNames[0], s.Offered.CPUs, resourceNames[1], s.Offered.MemoryGB, resourceNames[2], s.Offered.GPUs)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "class\tjobs\tshare\tmean duration (min)\tGPUs\tCPUs\tmemory (GB)\tgrace period (min)\toffered load\t")
	for _, c := range append(slices.Clone(s.Classes), s.All) {
		name := c.Class
		if name == "" {
			name = "unspecified"
		}
		fmt.Fprintf(w, "%s\t%d\t%.1f%%\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.3f\t\n",
			name, c.Jobs, 100*c.Fraction, c.MeanDuration/minute, c.MeanGPUs, c.MeanCPUs, c.MeanMemoryGB,
			c.MeanGracePeriod/minute, c.OfferedLoad)
	}
	w.Flush()
	return b.String()
}
