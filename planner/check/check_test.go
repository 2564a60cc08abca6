package check

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

var (
	jobA = Ref{"default", "a"}
	jobB = Ref{"default", "b"}
)

func lease(j Ref, id string, granted float64, gpus ...string) JobLease {
	return JobLease{Key: JobLeasePath + j.Namespace + "/" + j.ID, LeaseID: id, Namespace: j.Namespace, JobID: j.ID,
		NodeID: "n1", NodeName: "node-1", GPUs: gpus, GrantedAt: at(granted)}
}

// keys are the GPU keys of leases, as a grant writes them.
func keys(ls ...JobLease) []GPULease {
	var out []GPULease
	for _, l := range ls {
		for _, g := range l.AllGPUs() {
			out = append(out, GPULease{Key: GPULeasePath + g, GPU: g, GPUField: g, LeaseID: l.LeaseID,
				Namespace: l.Namespace, JobID: l.JobID, NodeName: l.NodeName, GrantedAt: l.GrantedAt})
		}
	}
	return out
}

func themisJob(j Ref, pool, status string, submit float64) Job {
	return Job{Ref: j, Pool: pool, Status: status, SubmitTime: at(submit), Themis: true}
}

func running(id string, j Ref, started float64, gpus ...string) Alloc {
	return Alloc{ID: id, Job: j, NodeName: "node-1", ClientStatus: "running", CreateTime: at(started - 1), ModifyTime: at(started),
		Tasks: map[string]Task{"train": {State: "running", StartedAt: at(started), GPUs: gpus}}}
}

func ended(id string, j Ref, started, finished float64, status string, evs ...Event) Alloc {
	return Alloc{ID: id, Job: j, NodeName: "node-1", ClientStatus: status, CreateTime: at(started - 1), ModifyTime: at(finished),
		Tasks: map[string]Task{"train": {State: "dead", StartedAt: at(started), FinishedAt: at(finished), Events: evs}}}
}

func ev(typ string, s float64) Event { return Event{Type: typ, Time: at(s)} }

func sigkill(s float64) Event {
	return Event{Type: EventTerminated, Time: at(s), Signal: 9, ExitCode: 0}
}

func revoking(l JobLease, since, grace float64) JobLease {
	l.Revoke = &Revoke{Reason: "preempted for default/te by fitgpp", Since: at(since), Deadline: at(since + grace)}
	return l
}

func gang(l JobLease, parts ...[]string) JobLease {
	l.GPUs = nil
	for i, gs := range parts {
		l.Parts = append(l.Parts, Part{NodeID: "n" + string(rune('0'+i)), NodeName: "node-" + string(rune('0'+i)), GPUs: gs})
		l.GPUs = append(l.GPUs, gs...)
	}
	return l
}

func revokesOf(ls ...JobLease) []SeenRevoke {
	var out []SeenRevoke
	for _, l := range ls {
		if l.Revoke != nil {
			out = append(out, SeenRevoke{Job: l.Ref(), LeaseID: l.LeaseID, GrantedAt: l.GrantedAt, Revoke: *l.Revoke})
		}
	}
	return out
}

// kinds summarizes violations as "kind job gpu".
func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		s := string(v.Kind) + " " + v.Job
		if v.GPU != "" {
			s += " " + v.GPU
		}
		out = append(out, s)
	}
	return out
}

func TestCheck(t *testing.T) {
	la := lease(jobA, "LA", 0, "g0", "g1")
	lb := lease(jobB, "LB", 5, "g2", "g3")
	tol := DefaultTolerances
	for _, tc := range []struct {
		name string
		s    Snapshot
		want []string
	}{
		// Invariant 1 in Consul.
		{name: "two jobs leased their own GPUs",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{la, lb}, GPULeases: keys(la, lb)}},
		{name: "two job leases list one GPU",
			s:    Snapshot{Now: at(60), JobLeases: []JobLease{la, lease(jobB, "LB", 5, "g1", "g2")}, GPULeases: keys(la)},
			want: []string{"double-lease default/b g1", "lease-keys default/b g2"}},
		{name: "a GPU key whose job's lease does not list it",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{la, lb}, GPULeases: append(keys(la, lb),
				GPULease{Key: GPULeasePath + "g4", GPU: "g4", GPUField: "g4", LeaseID: "LA", Namespace: "default", JobID: "a"})},
			want: []string{"double-lease default/a g4"}},
		{name: "a GPU key of a job with no lease",
			s:    Snapshot{Now: at(60), JobLeases: []JobLease{la}, GPULeases: keys(la, lb)},
			want: []string{"double-lease default/b g2", "double-lease default/b g3"}},
		{name: "a GPU key names another job than the lease that lists it",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{la}, GPULeases: append(keys(la)[:1],
				GPULease{Key: GPULeasePath + "g1", GPU: "g1", GPUField: "g1", LeaseID: "LB", Namespace: "default", JobID: "b"})},
			want: []string{"double-lease default/a g1"}},
		{name: "a GPU key of an older lease of the same job",
			s:    Snapshot{Now: at(60), JobLeases: []JobLease{la}, GPULeases: keys(la, lease(jobA, "LA0", -100, "g1"))[1:]},
			want: []string{"lease-keys default/a g0", "lease-keys default/a g1"}},
		{name: "a gang's lease lists the GPUs of its parts",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"h0"})},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"}))}},
		{name: "a gang part's GPU leased to another job",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"g2"}), lb},
				GPULeases: keys(lb, lease(jobA, "LA", 0, "g0"))},
			want: []string{"double-lease default/b g2"}},
		{name: "undecodable key",
			s:    Snapshot{Now: at(60), BadKeys: []BadKey{{Key: JobLeasePath + "default/x", Err: "unexpected end of JSON input"}}},
			want: []string{"bad-key "}},

		// Invariant 1 in Nomad.
		{name: "tasks run on their leased GPUs",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{la, lb}, GPULeases: keys(la, lb),
				Jobs:   []Job{themisJob(jobA, "gpu", "running", 0), themisJob(jobB, "gpu", "running", 5)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0", "g1"), running("b1", jobB, 7, "g2", "g3")}}},
		{name: "a victim still runs on its revoking lease within its grace",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{revoking(la, 55, 30)}, GPULeases: keys(la),
				Jobs: []Job{themisJob(jobA, "themis-pending", "running", 55)}, Allocs: []Alloc{running("a1", jobA, 2, "g0", "g1")}}},
		{name: "a task on a GPU with no lease",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{la}, GPULeases: keys(la),
				Jobs: []Job{themisJob(jobA, "gpu", "running", 0)}, Allocs: []Alloc{running("a1", jobA, 2, "g0", "g5")}},
			want: []string{"unleased-gpu default/a g5"}},
		{name: "a task on a GPU leased to another job",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{la, lb}, GPULeases: keys(la, lb),
				Jobs: []Job{themisJob(jobA, "gpu", "running", 0)}, Allocs: []Alloc{running("a1", jobA, 2, "g0", "g2")}},
			want: []string{"unleased-gpu default/a g2"}},
		{name: "a task running after its lease was released",
			s: Snapshot{Now: at(60), Jobs: []Job{themisJob(jobA, "gpu", "running", 0)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0", "g1")}},
			want: []string{"unleased-gpu default/a g0", "unleased-gpu default/a g1"}},
		{name: "a job that is not a themis job may use the GPUs (raw_exec baseline)",
			s: Snapshot{Now: at(60), Jobs: []Job{{Ref: jobA, Pool: "default", Status: "running"}},
				Allocs: []Alloc{running("a1", jobA, 2, "g0", "g1")}}},
		{name: "an ungated job's allocation the driver refused never ran",
			s: Snapshot{Now: at(10), Jobs: []Job{themisJob(jobA, "default", "pending", 0)},
				Allocs: []Alloc{ended("a1", jobA, 2, 2, "failed")}}},

		// Invariant 2.
		{name: "a gang with all parts running",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"h0"})},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"})), Jobs: []Job{themisJob(jobA, "gpu", "running", 0)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0"), running("a2", jobA, 3, "h0")}}},
		{name: "a gang between grant and pin: nothing runs",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"h0"})},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"})), Jobs: []Job{themisJob(jobA, "themis-pending", "pending", 0)}}},
		{name: "a gang starting: one part runs, within the tolerance",
			s: Snapshot{Now: at(20), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"h0"})},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"})), Jobs: []Job{themisJob(jobA, "gpu", "running", 0)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0")}}},
		{name: "a gang with one part running for longer than the tolerance",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"h0"})},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"})), Jobs: []Job{themisJob(jobA, "gpu", "running", 0)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0")}},
			want: []string{"partial-gang default/a"}},
		{name: "a gang whose part ended while the other runs on",
			s: Snapshot{Now: at(100), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"h0"})},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"})), Jobs: []Job{themisJob(jobA, "gpu", "running", 0)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0"), ended("a2", jobA, 2, 50, "failed")}},
			want: []string{"partial-gang default/a"}},
		{name: "a gang's parts ending one after the other",
			s: Snapshot{Now: at(60), JobLeases: []JobLease{gang(la, []string{"g0"}, []string{"h0"})},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"})), Jobs: []Job{themisJob(jobA, "gpu", "running", 0)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0"), ended("a2", jobA, 2, 50, "complete")}}},
		{name: "a revoked gang's parts checkpointing, one done early, within the grace",
			s: Snapshot{Now: at(200), JobLeases: []JobLease{revoking(gang(la, []string{"g0"}, []string{"h0"}), 100, 120)},
				GPULeases: keys(gang(la, []string{"g0"}, []string{"h0"})), Jobs: []Job{themisJob(jobA, "themis-pending", "running", 100)},
				Allocs: []Alloc{running("a1", jobA, 2, "g0"), ended("a2", jobA, 2, 110, "complete")}}},

		// Invariant 4.
		{name: "a victim killed at its deadline",
			s: Snapshot{Now: at(200), Jobs: []Job{themisJob(jobA, "themis-pending", "dead", 100)},
				Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs:  []Alloc{ended("a1", jobA, 2, 130.2, "complete", ev(EventKilling, 100.1), sigkill(130.2), ev("Killed", 130.3))}}},
		{name: "a victim that checkpointed and exited early",
			s: Snapshot{Now: at(200), Jobs: []Job{themisJob(jobA, "themis-pending", "dead", 100)},
				Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs: []Alloc{ended("a1", jobA, 2, 104, "complete", ev(EventKilling, 100.1),
					Event{Type: EventTerminated, Time: at(104)}, ev("Killed", 104.1))}}},
		{name: "a victim that died of the checkpoint signal",
			s: Snapshot{Now: at(200), Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs: []Alloc{ended("a1", jobA, 2, 100.2, "failed", ev(EventKilling, 100.1),
					Event{Type: EventTerminated, Time: at(100.2), Signal: 15})}}},
		{name: "a victim OOM-killed while checkpointing",
			s: Snapshot{Now: at(200), Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs: []Alloc{ended("a1", jobA, 2, 105, "failed", ev(EventKilling, 100.1),
					Event{Type: EventTerminated, Time: at(105), Signal: 9, OOMKilled: true})}}},
		{name: "a victim killed before its deadline",
			s: Snapshot{Now: at(200), Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs: []Alloc{ended("a1", jobA, 2, 105, "complete", Event{Type: EventKilling, Time: at(100.1), KillTimeout: 5 * time.Second},
					sigkill(105), ev("Killed", 105.1))}},
			want: []string{"grace-cut default/a"}},
		{name: "a victim killed with exit code 137 before its deadline",
			s: Snapshot{Now: at(200), Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs: []Alloc{ended("a1", jobA, 2, 110, "failed", ev(EventKilling, 100.1),
					Event{Type: EventTerminated, Time: at(110), ExitCode: 137})}},
			want: []string{"grace-cut default/a"}},
		{name: "a kill within the tolerance of the deadline",
			s: Snapshot{Now: at(200), Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs: []Alloc{ended("a1", jobA, 2, 129.5, "complete", ev(EventKilling, 100.1), sigkill(129.5))}}},
		{name: "a kill from before the revoke (an earlier stop) is not this revoke's",
			s: Snapshot{Now: at(200), Revokes: revokesOf(revoking(la, 100, 30)),
				Allocs: []Alloc{ended("a0", jobA, 2, 50, "complete", ev(EventKilling, 45), sigkill(50))}}},
		{name: "the resumed allocation preempted again is judged by its own revoke",
			s: Snapshot{Now: at(200),
				Revokes: append(revokesOf(revoking(la, 100, 60)), revokesOf(revoking(lease(jobA, "LA2", 110, "g0"), 120, 5))...),
				Allocs: []Alloc{
					ended("a1", jobA, 2, 103, "complete", ev(EventKilling, 100.1), Event{Type: EventTerminated, Time: at(103)}),
					ended("a2", jobA, 112, 125.1, "complete", ev(EventKilling, 120.1), sigkill(125.1)),
				}}},

		// Invariant 5.
		{name: "queued, granted, running and finished jobs",
			s: Snapshot{Now: at(600), JobLeases: []JobLease{la}, GPULeases: keys(la),
				Jobs: []Job{themisJob(jobA, "gpu", "running", 0), themisJob(jobB, "themis-pending", "pending", 0),
					themisJob(Ref{"default", "done"}, "gpu", "dead", 0),
					{Ref: Ref{"default", "stopped"}, Pool: "gpu", Status: "running", Stop: true, Themis: true}},
				Allocs: []Alloc{running("a1", jobA, 2, "g0", "g1")}}},
		{name: "a suspended job, dead in the pending pool",
			s: Snapshot{Now: at(600), Jobs: []Job{themisJob(jobA, "themis-pending", "dead", 0)},
				Statuses: map[Ref]Status{jobA: {State: "suspended"}}}},
		{name: "a job between pin and placement",
			s: Snapshot{Now: at(30), Jobs: []Job{themisJob(jobA, "gpu", "pending", 10)},
				Statuses: map[Ref]Status{jobA: {State: "granted", Since: at(9)}}}},
		{name: "a pinned job never placed",
			s: Snapshot{Now: at(600), Jobs: []Job{themisJob(jobA, "gpu", "pending", 10)},
				Statuses: map[Ref]Status{jobA: {State: "granted", Since: at(9)}}},
			want: []string{"lost-job default/a"}},
		{name: "a pinned job whose allocation failed and was not replaced",
			s: Snapshot{Now: at(600), Jobs: []Job{themisJob(jobA, "gpu", "pending", 10)},
				Allocs: []Alloc{ended("a1", jobA, 12, 20, "failed")}},
			want: []string{"lost-job default/a"}},
		{name: "a job whose allocation is pending on its node",
			s: Snapshot{Now: at(600), Jobs: []Job{themisJob(jobA, "gpu", "pending", 10)},
				Allocs: []Alloc{{ID: "a1", Job: jobA, ClientStatus: "pending", CreateTime: at(11)}}}},
		{name: "a rejected job outside the pending pool is waiting on its user",
			s: Snapshot{Now: at(600), Jobs: []Job{themisJob(jobA, "default", "pending", 10)},
				Statuses: map[Ref]Status{jobA: {State: "rejected"}}}},
		{name: "a job that is not a themis job is not watched",
			s: Snapshot{Now: at(600), Jobs: []Job{{Ref: jobA, Pool: "default", Status: "pending", SubmitTime: at(0)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kinds(Check(tc.s, tol))
			if !slices.Equal(got, tc.want) {
				for _, v := range Check(tc.s, tol) {
					t.Log(v)
				}
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

// Each violation says what, which job, which GPU or allocation, and since
// when, in words.
func TestViolationMessages(t *testing.T) {
	la := lease(jobA, "LA", 0, "g0", "g1")
	s := Snapshot{Now: at(200), JobLeases: []JobLease{la, lease(jobB, "LB", 5, "g1")}, GPULeases: keys(la),
		Revokes: revokesOf(revoking(la, 100, 30)),
		Allocs: []Alloc{ended("a1234567890", jobA, 2, 105, "complete",
			Event{Type: EventKilling, Time: at(100.1), KillTimeout: 5 * time.Second}, sigkill(105))}}
	vs := Check(s, DefaultTolerances)
	if len(vs) != 2 {
		t.Fatalf("got %v", vs)
	}
	for _, want := range []string{
		"double-lease job=default/b gpu=g1 since=2026-11-24T10:00:05Z: GPU g1 is leased to 2 jobs: default/a (lease LA",
		"grace-cut job=default/a node=node-1 alloc=a1234567890 since=2026-11-24T10:01:45Z: task \"train\" of allocation a1234567 was killed at 2026-11-24T10:01:45Z, 25s before its grace period ended",
	} {
		found := false
		for _, v := range vs {
			found = found || strings.HasPrefix(v.String(), want)
		}
		if !found {
			t.Errorf("no violation reads %q; got:\n%v", want, vs)
		}
	}
	if !strings.Contains(vs[1].Message, "kill timeout of 5s") {
		t.Errorf("grace-cut message does not give Nomad's kill timeout: %s", vs[1].Message)
	}
}

// The watcher remembers a revoke after its lease is released, and reports
// each violation once.
func TestWatcherRemembersRevokesAndReportsOnce(t *testing.T) {
	la := revoking(lease(jobA, "LA", 0, "g0"), 100, 30)
	w := &Watcher{}
	s1 := Snapshot{Now: at(101), JobLeases: []JobLease{la}, GPULeases: keys(la), Revokes: revokesOf(la)}
	if vs := Check(w.remember(s1), DefaultTolerances); len(vs) != 0 {
		t.Fatal(vs)
	}
	// The victim was killed early and its lease released.
	s2 := Snapshot{Now: at(110), Allocs: []Alloc{ended("a1", jobA, 2, 105, "complete", ev(EventKilling, 100.1), sigkill(105))}}
	if got := kinds(Check(w.remember(s2), DefaultTolerances)); !slices.Equal(got, []string{"grace-cut default/a"}) {
		t.Fatalf("after the release: %v", got)
	}
	// Forgotten after Remember.
	w.Remember = time.Minute
	s3 := s2
	s3.Now = at(200)
	if got := Check(w.remember(s3), DefaultTolerances); len(got) != 0 {
		t.Fatalf("a revoke not seen for 90s is still remembered with Remember = 1m: %v", got)
	}
}

// A violation that ends and comes back is reported again; one that lasts
// is reported once.
func TestWatcherReportsEachViolationOnce(t *testing.T) {
	var got []string
	w := &Watcher{Report: func(v Violation) { got = append(got, v.ID()) }}
	la, lb := lease(jobA, "LA", 0, "g0"), lease(jobB, "LB", 5, "g0")
	bad := Snapshot{Now: at(10), JobLeases: []JobLease{la, lb}, GPULeases: keys(la)}
	good := Snapshot{Now: at(11), JobLeases: []JobLease{la}, GPULeases: keys(la)}
	for _, s := range []Snapshot{bad, bad, good, bad} {
		w.report(Check(w.remember(s), DefaultTolerances))
	}
	if len(got) != 2 || got[0] != got[1] {
		t.Fatalf("reported %q, want the double lease twice (before and after it ended)", got)
	}
}
