package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// The adversary suite (docs/adversary.md): one test per attack a user who
// may submit Nomad jobs can make on the planner. Each shows that the
// hostile job gains nothing (no GPU beyond its lease), that the planner
// keeps deciding (a good job submitted after it is granted and runs), and
// the suite's invariant watcher (check_test.go) sees no violation through
// it. ACL-mode attacks are in adversary_acl_test.go.

// A job whose ID Nomad routes elsewhere: GET /v1/job/<id> is routed by the
// path's suffix even with the ID's "/" escaped, so "x/allocations" reaches
// the allocations handler (an array comes back), and ".." is redirected
// away from the job (it read as not found, and was skipped unseen). None
// may stop a round: the themis job "e2e-adv/allocations" is granted and
// runs, the non-themis job with a routed ID (any driver) changes nothing,
// ".." and "e2e-adv/x..y" are rejected with a reason that asks for another
// name (no checkpoint dir can hold the one, Consul's KV API refuses to read
// the other's keys), the good job submitted after them runs, and `themis
// check -once` reads them all.
func TestAdversaryJobIDsNomadRoutesElsewhere(t *testing.T) {
	const routed, dots, dotted, good = "e2e-adv/allocations", "..", "e2e-adv/x..y", "e2e-adv-after-routed"
	registerRouted(t, helloJob(t, routed, 5, 1))
	registerRouted(t, helloJob(t, dots, 5, 1))
	registerRouted(t, helloJob(t, dotted, 5, 1))
	plain := rawExecJob(t, "e2e-adv/evaluations", 5, nil) // no stanza: not a themis job
	plain.NodePool = ptrTo("default")
	registerRouted(t, plain)
	register(t, helloJob(t, good, 5, 1))

	for _, id := range []string{routed, good} {
		waitCompleteRouted(t, id, 90*time.Second)
	}
	checkRejectedUnplaced(t, env.nomad, env.consul, dots, []string{`job ".."`, "dot segment", "rename"})
	checkRejectedUnplaced(t, env.nomad, env.consul, dotted, []string{`job "e2e-adv/x..y"`, "refuses", "rename"})
	out, err := exec.Command(env.themis, "check", "-once",
		"-nomad-addr", env.stack.NomadAddr(), "-consul-addr", env.stack.ConsulAddr()).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") || !strings.Contains(string(out), "(0 unreadable)") {
		t.Fatalf("themis check -once: %v\n%s", err, out)
	}
}

// Keys under themis/ whose values do not decode, or that name another job
// than their key, written by anyone with write on the prefix (a node's
// driver token may write themis/checkpoints/ and themis/progress/): none
// stops a round. A job whose planner record does not decode is set aside
// (status "unreadable", naming the key), alone; the good job runs.
func TestAdversaryUndecodableRecordsStopNoRound(t *testing.T) {
	const victim, good = "e2e-adv-badrecord", "e2e-adv-after-garbage"
	garbage := map[string]string{
		lease.ProgressKey("default", "e2e-adv-garbage"):                "{not json",
		lease.CheckpointKey("default", "e2e-adv-garbage"):              "[]",
		lease.PendingKey("default", "e2e-adv-garbage"):                 `{"namespace": 7}`,
		lease.ProgressKey("default", "e2e-adv-other"):                  `{"namespace":"default","job_id":"e2e-adv-someone-else","iteration":5}`,
		lease.RecordKey(core.JobKey{Namespace: "default", ID: victim}): `{"first_submit": "yesterday"}`,
	}
	for k, v := range garbage {
		if _, err := env.consul.KV().Put(&consulapi.KVPair{Key: k, Value: []byte(v)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for k := range garbage {
			_, _ = env.consul.KV().Delete(k, nil)
		}
	})
	trainJob{gpus: 1, steps: 5}.run(t, victim)
	trainJob{gpus: 1, steps: 5}.run(t, good)
	waitDead(t, good, 60*time.Second)
	eventually(t, 30*time.Second, victim+" set aside naming its record", func() (bool, error) {
		st := jobStatus(t, victim)
		if st == nil {
			return false, fmt.Errorf("no status")
		}
		return st.State == "unreadable" && strings.Contains(st.Reason, lease.RecordKey(core.JobKey{Namespace: "default", ID: victim})),
			fmt.Errorf("status %s: %s", st.State, st.Reason)
	})
	if l := jobLease(t, victim); l != nil {
		t.Fatalf("%s, whose record does not decode, was granted %v", victim, l.GPUs)
	}
}

// A themis job that asks for GPUs where its lease does not reach: a second
// group whose raw_exec task asks for themis GPUs, a device "gpu" (any
// vendor's) in a raw_exec themis task, a device "nvidia/gpu" in a themis
// task, and a group count that meta only the planner writes
// (themis.gang) lets through. Each is rejected naming its group, task and
// block, and never placed; the good job submitted after them runs on its
// lease alone.
func TestAdversaryPinPlacesOnlyWhatWasLeased(t *testing.T) {
	hostile := unleasedRoutes(t, "e2e-adv")
	for _, h := range hostile {
		register(t, h.job)
	}
	const good = "e2e-adv-after-devices"
	register(t, helloJob(t, good, 5, 1))
	waitDead(t, good, 60*time.Second)
	for _, h := range hostile {
		checkRejectedUnplaced(t, env.nomad, env.consul, *h.job.ID, h.names)
	}
}

// unleasedRoute is a hostile job and what its rejection must name.
type unleasedRoute struct {
	job   *nomadapi.Job
	names []string
}

// unleasedRoutes are the jobs of TestAdversaryPinPlacesOnlyWhatWasLeased,
// their IDs prefixed.
func unleasedRoutes(t *testing.T, prefix string) []unleasedRoute {
	t.Helper()
	gpuDevice := func(name string, n uint64) *nomadapi.RequestedDevice {
		return &nomadapi.RequestedDevice{Name: name, Count: &n}
	}
	// A second group: a raw_exec task asking for four themis GPUs.
	second := helloJob(t, prefix+"-second-group", 50, 1)
	side := rawExecJob(t, prefix+"-side", 50, nil).TaskGroups[0]
	side.Name = ptrTo("side")
	side.Tasks[0].Name = "grab"
	side.Tasks[0].Resources.Devices = []*nomadapi.RequestedDevice{gpuDevice(topology.Vendor+"/"+topology.DeviceType, 4)}
	second.TaskGroups = append(second.TaskGroups, side)
	// A raw_exec themis task with a device "gpu" (any vendor's GPUs)
	// besides what the pin writes: no driver checks its lease.
	anyVendor := rawExecJob(t, prefix+"-any-vendor", 50, map[string]string{"themis.gpus": "1"})
	anyVendor.TaskGroups[0].Tasks[0].Resources.Devices = []*nomadapi.RequestedDevice{gpuDevice("gpu", 2)}
	// device "nvidia/gpu" in a themis task.
	nvidia := helloJob(t, prefix+"-nvidia", 50, 1)
	nvidia.TaskGroups[0].Tasks[0].Resources.Devices = []*nomadapi.RequestedDevice{gpuDevice("nvidia/gpu", 1)}
	// themis.gang, which only the planner writes, lets a group count of
	// 3 through.
	gang := rawExecJob(t, prefix+"-forged-gang", 50, map[string]string{"themis.gpus": "1"})
	gang.TaskGroups[0].Count = ptrTo(3)
	gang.Meta = map[string]string{"themis.gang": "3"}
	return []unleasedRoute{
		{second, []string{`group "side"`, `task "grab"`, `device "themis/gpu"`}},
		{anyVendor, []string{`group "train"`, `task "hello"`, `device "gpu"`}},
		{nvidia, []string{`group "train"`, `task "hello"`, `device "nvidia/gpu"`}},
		{gang, []string{`meta "themis.gang"`}},
	}
}

// checkRejectedUnplaced fails the test unless job id (default namespace of
// the Nomad at c, the planner's records in Consul cc) is rejected with a
// reason naming every one of names, and none of its allocations ever held a
// GPU.
func checkRejectedUnplaced(t *testing.T, c *nomadapi.Client, cc *consulapi.Client, id string, names []string) {
	t.Helper()
	var last string
	eventually(t, 30*time.Second, id+" rejected", func() (bool, error) {
		st := statusListed(t, cc, core.JobKey{Namespace: "default", ID: id})
		if st == nil {
			last = "no status"
			return false, nil
		}
		last = st.State + ": " + st.Reason
		return st.State == "rejected", nil
	})
	for _, n := range names {
		if !strings.Contains(last, n) {
			t.Errorf("%s's rejection does not name %s: %s", id, n, last)
		}
	}
	if held := gpusHeld(t, c, id); len(held) > 0 {
		t.Errorf("%s (%s) got GPUs: %v", id, last, held)
	}
}

// statusListed is a job's status record as a listing of themis/status/
// finds it (as `themis status` reads them): a job whose key Consul's KV
// API cannot read by path ("..") still has its record listed.
func statusListed(t *testing.T, cc *consulapi.Client, k core.JobKey) *lease.JobStatus {
	t.Helper()
	sts, err := consul.NewStore(cc).Statuses(env.ctx)
	if err != nil {
		t.Fatalf("list statuses: %v", err)
	}
	for i := range sts {
		if sts[i].Namespace == k.Namespace && sts[i].JobID == k.ID {
			return &sts[i]
		}
	}
	return nil
}

// gpusHeld lists, per allocation of job id, the themis GPUs Nomad
// allocated to its tasks.
func gpusHeld(t *testing.T, c *nomadapi.Client, id string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, stub := range allocsFiltered(t, c, "default", id) {
		a, _, err := c.Allocations().Info(stub.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.AllocatedResources == nil {
			continue
		}
		for task, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				if d.Vendor == topology.Vendor && d.Type == topology.DeviceType {
					out[stub.ID+"/"+task] = append(out[stub.ID+"/"+task], d.DeviceIDs...)
				}
			}
		}
	}
	return out
}

// allocsFiltered lists job id's allocations by a filter on the allocations list:
// GET /v1/job/<id>/allocations is routed by the ID too (".." would list
// every allocation of the cluster).
func allocsFiltered(t *testing.T, c *nomadapi.Client, ns, id string) []*nomadapi.AllocationListStub {
	t.Helper()
	as, _, err := c.Allocations().List(&nomadapi.QueryOptions{Namespace: ns, Filter: fmt.Sprintf("JobID == %q", id)})
	if err != nil {
		t.Fatalf("allocations of %s: %v", id, err)
	}
	return as
}

// registerRouted registers a job whose ID Nomad's GET /v1/job/<id> does not
// serve (a "/" routed by suffix, or dot segments): `nomad job stop` cannot
// remove it either, so the cleanup stops it by registering it again with
// Stop set (PUT /v1/jobs, routed by no ID) and garbage-collects it once
// dead.
func registerRouted(t *testing.T, job *nomadapi.Job) {
	t.Helper()
	if _, _, err := env.nomad.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %q: %v", *job.ID, err)
	}
	t.Cleanup(func() {
		stopped := *job
		stopped.Stop = ptrTo(true)
		if _, _, err := env.nomad.Jobs().Register(&stopped, nil); err != nil {
			t.Errorf("stop %q: %v", *job.ID, err)
			return
		}
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if s := stubOf(t, *job.ID); s == nil {
				return
			} else if s.Status == "dead" {
				_ = env.nomad.System().GarbageCollect()
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Errorf("job %q still in Nomad after 60s", *job.ID)
	})
}

// stubOf is job id's list stub (default namespace), nil when Nomad has none.
func stubOf(t testing.TB, id string) *nomadapi.JobListStub {
	t.Helper()
	stubs, _, err := env.nomad.Jobs().PrefixList(id)
	if err != nil {
		t.Fatalf("list jobs %q: %v", id, err)
	}
	for _, s := range stubs {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// waitCompleteRouted waits until job id (whatever its ID) has an
// allocation that completed, its task having seen the GPUs Nomad gave it
// (the suite's invariant watcher checks those against the job's lease
// while it runs), and the planner says it finished.
func waitCompleteRouted(t *testing.T, id string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "job "+id+" to be granted and complete", func() (bool, error) {
		as := allocsFiltered(t, env.nomad, "default", id)
		st := statusListed(t, env.consul, core.JobKey{Namespace: "default", ID: id})
		for _, a := range as {
			if a.ClientStatus == "complete" && st != nil && st.State == "finished" {
				var gave []string
				for _, g := range gpusHeld(t, env.nomad, id) {
					gave = append(gave, g...)
				}
				checkSeesLeased(t, id, taskStdout(t, a.ID), gave)
				return true, nil
			}
		}
		if st == nil {
			return false, fmt.Errorf("no status, %d allocations", len(as))
		}
		return false, fmt.Errorf("status %s (%s), %d allocations", st.State, st.Reason, len(as))
	})
}

func ptrTo[T any](v T) *T { return &v }

// A running job re-registered by its user with the meta only the planner
// writes kept or forged (docs/adversary.md, part 3): the planner trusts
// only its own records. "forged-lease" keeps themis.lease_id and asks Nomad
// for the node's 8 GPUs without the pin's device constraint (Nomad cannot
// place that, so the old allocation runs on): it is a new submission,
// so its lease is taken back through the revoke path (marked resubmitted)
// and the job granted again under a new lease. "forged-suspended" names
// its lease in themis.suspended (the meta the planner's suspension
// writes), count 1, still pinned: the planner suspends it all the same
// (count 0, in the pending pool). Both then run to completion on their
// leases, and the good job submitted after them runs.
func TestAdversaryForgedPlannerMeta(t *testing.T) {
	const forgedLease, forgedSuspended, good = "e2e-adv-forged-lease", "e2e-adv-forged-suspended", "e2e-adv-after-forged"
	first := map[string]string{}
	for _, id := range []string{forgedLease, forgedSuspended} {
		register(t, helloJob(t, id, 150, 1))
	}
	for _, id := range []string{forgedLease, forgedSuspended} {
		eventually(t, 60*time.Second, id+" granted and running", func() (bool, error) {
			l := jobLease(t, id)
			if l == nil {
				return false, nil
			}
			first[id] = l.LeaseID
			return slices.ContainsFunc(allocs(t, id), func(a *nomadapi.AllocationListStub) bool { return a.ClientStatus == "running" }), nil
		})
	}
	// The user reads each job back (`nomad job inspect`) and registers it
	// again, changed.
	reregister := func(id string, change func(j *nomadapi.Job)) {
		j, _, err := env.nomad.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		change(j)
		if _, _, err := env.nomad.Jobs().Register(j, nil); err != nil {
			t.Fatalf("register %s again: %v", id, err)
		}
	}
	reregister(forgedLease, func(j *nomadapi.Job) {
		all := uint64(8)
		j.TaskGroups[0].Tasks[0].Resources.Devices = []*nomadapi.RequestedDevice{{Name: topology.Vendor + "/" + topology.DeviceType, Count: &all}}
	})
	reregister(forgedSuspended, func(j *nomadapi.Job) {
		delete(j.Meta, "themis.lease_id")
		j.Meta["themis.suspended"], j.Meta["themis.count"] = first[forgedSuspended], "1"
	})
	eventually(t, 30*time.Second, forgedLease+"'s lease taken back as a resubmission", func() (bool, error) {
		l := jobLease(t, forgedLease)
		return l != nil && (l.LeaseID != first[forgedLease] || l.Revoke != nil && l.Revoke.Resubmitted), fmt.Errorf("lease %+v", l)
	})
	eventually(t, 30*time.Second, forgedSuspended+" suspended by the planner", func() (bool, error) {
		vs, _, _, err := env.nomad.Jobs().Versions(forgedSuspended, false, nil)
		if err != nil {
			return false, err
		}
		for _, v := range vs {
			if *v.TaskGroups[0].Count == 0 && *v.NodePool == "themis-pending" && v.Meta["themis.suspended"] == first[forgedSuspended] {
				return true, nil
			}
		}
		return false, fmt.Errorf("no version of count 0 in the pending pool among %d", len(vs))
	})
	register(t, helloJob(t, good, 5, 1))
	for _, id := range []string{forgedLease, forgedSuspended, good} {
		eventually(t, 120*time.Second, id+" finished", func() (bool, error) {
			st := jobStatus(t, id)
			return st != nil && st.State == "finished", fmt.Errorf("status %+v", st)
		})
	}
}

// A workload that lies about its progress (docs/adversary.md, part 5):
// after an honest report, its count jumps past the stanza's iterations
// (which, published, made its measured rate thousands of iterations a
// second and its remaining work nothing), then goes back (which restarted
// the rate it is measured at). The driver publishes neither, with a task
// event naming each; the honest report before them stands in Consul.
// (Themis's filter, live, ranks apps whose progress is not trusted as-run
// whatever they report: planner/arbiter TestUntrustedProgressLieGainsNothing.)
func TestAdversaryImplausibleProgress(t *testing.T) {
	const id = "e2e-adv-progress-lie"
	w := `w() { printf '%s' "$1" > "$THEMIS_PROGRESS_FILE.tmp" && mv "$THEMIS_PROGRESS_FILE.tmp" "$THEMIS_PROGRESS_FILE"; sleep 6; }; `
	trainJob{gpus: 1, iterations: 100, shell: w + `w '{"iteration": 10}'; w '{"iteration": 100000}'; w '{"iteration": 3}'`}.run(t, id)
	// What Consul held while the job ran (its record goes with the job).
	var seen []int64
	eventually(t, 90*time.Second, id+" to finish", func() (bool, error) {
		if rec := readKV[lease.ProgressRecord](t, env.consul, lease.ProgressKey("default", id)); rec != nil && !slices.Contains(seen, rec.Iteration) {
			seen = append(seen, rec.Iteration)
		}
		j, _, err := env.nomad.Jobs().Info(id, nil)
		return err == nil && finishedInNomad(j), err
	})
	if fmt.Sprint(seen) != "[10]" {
		t.Errorf("progress records published: iterations %v, want the honest report's 10 alone", seen)
	}
	var refused []string
	for _, a := range allocs(t, id) {
		for _, ts := range a.TaskStates {
			for _, e := range ts.Events {
				if e.DriverMessage == "Progress report refused" {
					refused = append(refused, e.Details["reason"])
				}
			}
		}
	}
	want := []string{"iteration 100000 is past the stanza's iterations (100)", "iteration 3 went back from 10"}
	if fmt.Sprint(refused) != fmt.Sprint(want) {
		t.Errorf("task events of refused reports: %q, want %q", refused, want)
	}
}
