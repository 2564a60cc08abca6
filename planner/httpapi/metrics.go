package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"time"

	"github.com/themis-nomad/themis/planner"
)

// metrics are the planner's Prometheus metrics (/metrics), set from each
// published round. The gauges describe the last decided round.
type metrics struct {
	reg *prometheus.Registry

	queue     *prometheus.GaugeVec // themis_queue_length{vc}
	gpus      *prometheus.GaugeVec // themis_gpus{node,vc,state}
	vcGPUs    *prometheus.GaugeVec // themis_vc_gpus{vc,state}
	revoking  prometheus.Gauge     // themis_revokes_in_progress
	leases    prometheus.Gauge     // themis_leases
	aside     prometheus.Gauge     // themis_jobs_unreadable
	leader    prometheus.Gauge     // themis_leader
	index     prometheus.Gauge     // themis_api_index
	rounds    prometheus.Counter   // themis_rounds_total
	skipped   prometheus.Counter   // themis_rounds_skipped_total
	errors    prometheus.Counter   // themis_round_errors_total
	latency   prometheus.Histogram // themis_round_duration_seconds
	decisions *prometheus.CounterVec
	jobs      *prometheus.GaugeVec     // themis_jobs{state}
	oldest    *prometheus.GaugeVec     // themis_queue_oldest_wait_seconds{vc}
	wait      *prometheus.HistogramVec // themis_queue_wait_seconds{vc}
	waits     waits
}

// JobStates are the states themis_jobs always reports (0 when none).
// A job is counted in the state the views show it in (ShownState): a
// queued job whose grant waits for its GPUs is waiting.
var JobStates = []string{"queued", StateWaiting, "suspended", "granted", "revoking", "rejected", planner.StateUnreadable,
	planner.StateFinished, planner.StateFailed, planner.StateLost, planner.StatePurged}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "themis_queue_length",
			Help: "Jobs waiting (queued or suspended) per virtual cluster, after the last round."}, []string{"vc"}),
		gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "themis_gpus",
			Help: "GPUs per node, virtual cluster and state (free, leased, revoking, unhealthy), after the last round."},
			[]string{"node", "vc", "state"}),
		vcGPUs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "themis_vc_gpus",
			Help: "A virtual cluster's guaranteed GPUs by state (used, free, doomed), after the last round."}, []string{"vc", "state"}),
		revoking: prometheus.NewGauge(prometheus.GaugeOpts{Name: "themis_revokes_in_progress",
			Help: "Leases being taken back (their jobs checkpoint and stop)."}),
		leases: prometheus.NewGauge(prometheus.GaugeOpts{Name: "themis_leases", Help: "Leases in Consul, revoking ones included."}),
		aside: prometheus.NewGauge(prometheus.GaugeOpts{Name: "themis_jobs_unreadable",
			Help: "Jobs the last round set aside because they, or their records in Consul, cannot be read (status unreadable); every other job is decided."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "themis_leader", Help: "1 while this planner leads, else 0."}),
		index:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "themis_api_index", Help: "The API's index (X-Themis-Index)."}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{Name: "themis_rounds_total", Help: "Rounds run."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "themis_rounds_skipped_total",
			Help: "Rounds (counted in themis_rounds_total too) that ended before reading because nothing had changed since the last: its decision stands."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "themis_round_errors_total",
			Help: "Rounds that failed, wholly or in part (retried on the next event or resync)."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "themis_round_duration_seconds",
			Help:    "How long a round took (observe, decide, act).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "themis_decisions_total",
			Help: "Decisions carried out, by kind: grant, preempt, revoke (resubmitted job), release, promote."}, []string{"kind"}),
		jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "themis_jobs",
			Help: "Themis jobs Nomad has, by the state the views show (queued, waiting, suspended, granted, revoking, rejected, unreadable, finished, failed, lost, purged), after the last round."},
			[]string{"state"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "themis_queue_oldest_wait_seconds",
			Help: "How long the longest-waiting job of each virtual cluster's queue has waited, after the last round (0 when none waits)."}, []string{"vc"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "themis_queue_wait_seconds",
			Help:    "How long each granted job waited in its virtual cluster's queue (since it queued, or was suspended), observed at the grant.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}}, []string{"vc"}),
	}
	m.reg.MustRegister(m.queue, m.gpus, m.vcGPUs, m.revoking, m.leases, m.aside, m.leader, m.index, m.rounds, m.skipped, m.errors, m.latency, m.decisions,
		m.jobs, m.oldest, m.wait,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, k := range []string{planner.EventGrant, planner.EventPreempt, planner.EventRevoke, planner.EventRelease, planner.EventPromote} {
		m.decisions.WithLabelValues(k)
	}
	return m
}

func (m *metrics) leading(on bool) {
	if on {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// round counts a round and its decisions.
func (m *metrics) round(v planner.View) {
	m.rounds.Inc()
	if v.Skipped {
		m.skipped.Inc()
		m.age(v.Time)
	}
	m.latency.Observe(v.Duration.Seconds())
	if v.Err != nil {
		m.errors.Inc()
	}
	for _, e := range v.Events {
		m.decisions.WithLabelValues(e.Kind).Inc()
	}
}

// view sets the gauges from a decided round.
func (m *metrics) view(v planner.View) {
	m.queue.Reset()
	for _, q := range v.Queue {
		m.queue.WithLabelValues(q.VC).Inc()
	}
	for _, vc := range v.VCs {
		m.queue.WithLabelValues(vc.Name).Add(0)
	}
	m.gpus.Reset()
	for _, n := range buildNodes(v).Nodes {
		for _, g := range n.GPUs {
			m.gpus.WithLabelValues(n.Name, g.VC, g.State).Inc()
		}
	}
	m.vcGPUs.Reset()
	for _, vc := range v.VCs {
		m.vcGPUs.WithLabelValues(vc.Name, "used").Set(float64(vc.Used))
		m.vcGPUs.WithLabelValues(vc.Name, "free").Set(float64(vc.Free))
		m.vcGPUs.WithLabelValues(vc.Name, "doomed").Set(float64(vc.Doomed))
	}
	revoking := 0
	for _, l := range v.Leases {
		if l.Revoke != nil {
			revoking++
		}
	}
	m.revoking.Set(float64(revoking))
	m.leases.Set(float64(len(v.Leases)))
	aside := 0
	for _, j := range v.Jobs {
		if j.Status.State == planner.StateUnreadable {
			aside++
		}
	}
	m.aside.Set(float64(aside))
	m.jobs.Reset()
	for _, st := range JobStates {
		m.jobs.WithLabelValues(st)
	}
	for _, j := range v.Jobs {
		if j.Status.State != "" {
			m.jobs.WithLabelValues(ShownState(j.Status.State, j.Status.Reason)).Inc()
		}
	}
	granted, oldest := m.waits.observe(v)
	for _, g := range granted {
		m.wait.WithLabelValues(g.vc).Observe(max(0, g.seconds))
	}
	m.oldest.Reset()
	for _, vc := range v.VCs {
		m.oldest.WithLabelValues(vc.Name)
	}
	if len(v.VCs) == 0 {
		m.oldest.WithLabelValues("")
	}
	for vc, s := range oldest {
		m.oldest.WithLabelValues(vc).Set(s)
	}
}

// age moves each queue's longest wait on to now after a skipped round:
// the jobs the last decided round left waiting still wait.
func (m *metrics) age(now time.Time) {
	oldest := map[string]float64{}
	for _, s := range m.waits.since {
		oldest[s.vc] = max(oldest[s.vc], now.Sub(s.since).Seconds())
	}
	for vc, s := range oldest {
		m.oldest.WithLabelValues(vc).Set(s)
	}
}
