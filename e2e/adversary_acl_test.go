package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// The routes to a GPU the planner did not lease, taken by a user who holds
// exactly examples/acl/user.nomad.hcl (submit-job in the team's namespace,
// read on the pending pool) in a namespace made from
// examples/acl/team.namespace.hcl (the themis driver only), on a stack with
// ACLs on and `themis planner` running with the planner's tokens
// (docs/acl.md, "Users"). Through the planner: a second group asking for
// GPUs (raw_exec is refused by Nomad, a second themis task by the planner),
// device "gpu" and "nvidia/gpu" requests in the themis task, a group count
// let through by forged planner meta; past it: a job registered straight
// into the GPUs' node pool with more GPUs than its stanza asks. No task of
// the user's starts on a GPU its job holds no lease for, the job the user
// submits last is granted and runs, and `themis check -once` with the
// operator's tokens finds nothing.
func TestAdversaryACLSubmitOnlyUserGetsNoUnleasedGPU(t *testing.T) {
	ctx, cancel := context.WithCancel(env.ctx)
	defer cancel()
	st, dir := aclStack(t, ctx, "adv-acl-")
	tok := st.Tokens()
	admin, cc := apiClients(t, st.NomadAddr(), st.ConsulAddr(), tok.Management)
	nomadCLI(t, st, tok.Management, "namespace", "apply", filepath.Join(env.root, "examples", "acl", "team.namespace.hcl"))
	user := userClient(t, admin, st.NomadAddr())
	p := startThemisPlanner(t, st.NomadAddr(), st.ConsulAddr(), dir, tok.PlannerNomad, tok.PlannerConsul)

	inTeam := func(j *nomadapi.Job) *nomadapi.Job { j.Namespace = ptrTo("team"); return j }
	gpus := func(name string, n uint64) []*nomadapi.RequestedDevice {
		return []*nomadapi.RequestedDevice{{Name: name, Count: &n}}
	}
	// A second group with a raw_exec task asking for GPUs: Nomad refuses
	// the registration (the namespace allows the themis driver only).
	raw := inTeam(helloJob(t, "adv-acl-raw-group", 50, 1))
	side := rawExecJob(t, "side", 50, nil).TaskGroups[0]
	side.Name, side.Tasks[0].Resources.Devices = ptrTo("side"), gpus(topology.Vendor+"/"+topology.DeviceType, 4)
	raw.TaskGroups = append(raw.TaskGroups, side)
	if _, _, err := user.Jobs().Register(raw, nil); err == nil || !strings.Contains(err.Error(), "not allowed in namespace") {
		t.Fatalf("registering a raw_exec group in namespace team: %v, want Nomad's refusal of the driver", err)
	}
	// The same with a themis task in the second group.
	second := inTeam(helloJob(t, "adv-acl-second-group", 50, 1))
	grab := helloJob(t, "grab", 50, 1).TaskGroups[0]
	grab.Name, grab.Tasks[0].Name, grab.Tasks[0].Resources.Devices = ptrTo("side"), "grab", gpus(topology.Vendor+"/"+topology.DeviceType, 4)
	second.TaskGroups = append(second.TaskGroups, grab)
	anyVendor := inTeam(helloJob(t, "adv-acl-any-vendor", 50, 1))
	anyVendor.TaskGroups[0].Tasks[0].Resources.Devices = gpus("gpu", 2)
	nvidia := inTeam(helloJob(t, "adv-acl-nvidia", 50, 1))
	nvidia.TaskGroups[0].Tasks[0].Resources.Devices = gpus("nvidia/gpu", 1)
	gang := inTeam(helloJob(t, "adv-acl-forged-gang", 50, 1))
	gang.TaskGroups[0].Count, gang.Meta = ptrTo(3), map[string]string{"themis.gang": "3"}
	// Straight into the GPUs' pool, asking Nomad for 4 GPUs where the
	// stanza asks for 1: Nomad CE accepts it (node pools do not gate a
	// registration) and may place it before the planner moves it to the
	// pending pool; the themis driver refuses it there.
	direct := inTeam(helloJob(t, "adv-acl-direct", 50, 1))
	direct.NodePool = ptrTo("default")
	direct.TaskGroups[0].Tasks[0].Resources.Devices = gpus(topology.Vendor+"/"+topology.DeviceType, 4)
	hostile := []*nomadapi.Job{second, anyVendor, nvidia, gang, direct}
	for _, j := range hostile {
		if _, _, err := user.Jobs().Register(j, nil); err != nil {
			t.Fatalf("register %s as the user: %v", *j.ID, err)
		}
	}
	good := inTeam(helloJob(t, "adv-acl-good", 5, 1))
	if _, _, err := user.Jobs().Register(good, nil); err != nil {
		t.Fatalf("register %s as the user: %v", *good.ID, err)
	}
	eventually(t, 90*time.Second, *good.ID+" granted and complete", func() (bool, error) {
		as, _, err := admin.Jobs().Allocations(*good.ID, true, &nomadapi.QueryOptions{Namespace: "team"})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(as, func(a *nomadapi.AllocationListStub) bool { return a.ClientStatus == "complete" }), nil
	})
	for _, c := range []struct {
		id    string
		names []string
	}{
		{*second.ID, []string{"side/grab"}}, // a second themis task
		{*anyVendor.ID, []string{`group "train"`, `task "hello"`, `device "gpu"`}},
		{*nvidia.ID, []string{`group "train"`, `task "hello"`, `device "nvidia/gpu"`}},
		{*gang.ID, []string{`meta "themis.gang"`}},
	} {
		st := readKV[lease.JobStatus](t, cc, lease.StatusKey(core.JobKey{Namespace: "team", ID: c.id}))
		if st == nil || st.State != "rejected" {
			t.Errorf("%s: status %+v, want rejected", c.id, st)
			continue
		}
		for _, n := range c.names {
			if !strings.Contains(st.Reason, n) {
				t.Errorf("%s's rejection does not name %s: %s", c.id, n, st.Reason)
			}
		}
	}
	for _, j := range append(hostile, good) {
		checkStartedOnlyOnLeased(t, admin, cc, *j.ID)
	}
	cmd := exec.Command(env.themis, "check", "-once", "-nomad-addr", st.NomadAddr(), "-consul-addr", st.ConsulAddr())
	cmd.Env = append(os.Environ(), "NOMAD_TOKEN="+tok.OperatorNomad, "CONSUL_HTTP_TOKEN="+tok.OperatorConsul)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Errorf("themis check -once with the operator's tokens: %v\n%s", err, out)
	}
	if t.Failed() {
		t.Logf("planner:\n%s", p.output())
	}
}

// checkStartedOnlyOnLeased fails the test if a task of job id (namespace
// team) started in an allocation holding a themis GPU that was not in the
// job's lease when the task started (the lease is read now: a job that
// still runs holds the lease it started under; one that never had a lease
// must not have started on any GPU).
func checkStartedOnlyOnLeased(t *testing.T, nc *nomadapi.Client, cc *consulapi.Client, id string) {
	t.Helper()
	q := &nomadapi.QueryOptions{Namespace: "team"}
	stubs := allocsFiltered(t, nc, "team", id)
	l := readKV[lease.JobLease](t, cc, lease.JobKey("team", id))
	for _, s := range stubs {
		a, _, err := nc.Allocations().Info(s.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		for task, tr := range a.AllocatedResources.Tasks {
			var held []string
			for _, d := range tr.Devices {
				if d.Vendor == topology.Vendor && d.Type == topology.DeviceType {
					held = append(held, d.DeviceIDs...)
				}
			}
			ts := a.TaskStates[task]
			if len(held) == 0 || ts == nil || !hasEvent(ts.Events, nomadapi.TaskStarted) {
				continue
			}
			if s.ClientStatus == "complete" && l == nil {
				continue // ran under a lease since released (the good job)
			}
			if l == nil || !subset(held, l.GPUs) {
				t.Errorf("%s: task %s of allocation %s started on GPUs %v; lease %+v", id, task, s.ID, held, l)
			}
		}
	}
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// aclStack starts a one-agent stack with ACLs on, the policies of
// examples/acl loaded, in a folder of the suite's work dir; it stops when
// the test ends.
func aclStack(t *testing.T, ctx context.Context, prefix string) (*devstack.Stack, string) {
	t.Helper()
	agents, err := agentsDir(env.root)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(env.work, prefix)
	if err != nil {
		t.Fatal(err)
	}
	st, err := devstack.Start(ctx, devstack.Config{
		NomadBin: filepath.Join(agents, "nomad"), ConsulBin: filepath.Join(agents, "consul"),
		PluginDir: env.plugins, Templates: filepath.Join(env.root, "examples", "agents"),
		Topology: filepath.Join(env.root, "examples", "topology", "dev-node.hcl"), NodeName: "dev-node",
		DataDir: filepath.Join(dir, "stack"), ACL: true, Log: env.log.Named(prefix + "stack"),
	})
	if err != nil {
		t.Fatalf("start a stack with ACLs: %v", err)
	}
	t.Cleanup(func() {
		st.Stop()
		if !t.Failed() && os.Getenv("THEMIS_E2E_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	return st, st.DataDir()
}

// userClient creates a Nomad token with examples/acl/user.nomad.hcl (with
// the management client admin) and returns a client that uses it.
func userClient(t *testing.T, admin *nomadapi.Client, addr string) *nomadapi.Client {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(env.root, "examples", "acl", "user.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	return clientWithPolicy(t, admin, addr, "themis-user", string(rules), "a user")
}

// clientWithPolicy creates the ACL policy name with rules and a client
// token of it (tokenName), with the management client admin, and returns a
// Nomad client at addr that uses the token.
func clientWithPolicy(t *testing.T, admin *nomadapi.Client, addr, name, rules, tokenName string) *nomadapi.Client {
	t.Helper()
	if _, err := admin.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: name, Rules: rules}, nil); err != nil {
		t.Fatalf("create the ACL policy %s: %v", name, err)
	}
	tok, _, err := admin.ACLTokens().Create(&nomadapi.ACLToken{Name: tokenName, Type: "client", Policies: []string{name}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := nomadapi.DefaultConfig()
	cfg.Address, cfg.SecretID = addr, tok.SecretID
	c, err := nomadapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nomadCLI runs the nomad CLI against the stack with a token.
func nomadCLI(t *testing.T, st *devstack.Stack, token string, args ...string) {
	t.Helper()
	cmd := exec.Command(env.nomadBin, args...)
	cmd.Env = append(os.Environ(), "NOMAD_ADDR="+st.NomadAddr(), "NOMAD_TOKEN="+token)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nomad %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
