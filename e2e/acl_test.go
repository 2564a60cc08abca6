package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/lease"
)

// TestACL: a stack with ACLs on in both agents (`themis dev -acl`), the
// policies of examples/acl loaded. A `themis planner` with exactly the
// planner's tokens runs a job to completion (its lease written, the job run
// on its GPUs by the themis driver with the driver's Consul token); a
// planner whose Consul token lacks write on themis/leases/, or whose Nomad
// token is the read-only operator's, is refused at start with an error that
// names the call and the policy (docs/acl.md).
func TestACL(t *testing.T) {
	ctx, cancel := context.WithCancel(env.ctx)
	defer cancel()
	agents, err := agentsDir(env.root)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(env.work, "acl-")
	if err != nil {
		t.Fatal(err)
	}
	st, err := devstack.Start(ctx, devstack.Config{
		NomadBin: filepath.Join(agents, "nomad"), ConsulBin: filepath.Join(agents, "consul"),
		PluginDir: env.plugins, Templates: filepath.Join(env.root, "examples", "agents"),
		Topology: filepath.Join(env.root, "examples", "topology", "dev-node.hcl"), NodeName: "dev-node",
		DataDir: filepath.Join(dir, "stack"), ACL: true, Log: env.log.Named("acl-stack"),
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
	tok := st.Tokens()
	nc, cc := apiClients(t, st.NomadAddr(), st.ConsulAddr(), tok.Management)

	// ACLs are on: no token, no nodes.
	anon := nomadapi.DefaultConfig()
	anon.Address = st.NomadAddr()
	if an, err := nomadapi.NewClient(anon); err != nil {
		t.Fatal(err)
	} else if _, _, err := an.Nodes().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Nomad without a token listed nodes (err %v): ACLs are not on", err)
	}

	// The planner with exactly its policies runs a job to completion.
	p := startThemisPlanner(t, st.NomadAddr(), st.ConsulAddr(), st.DataDir(), tok.PlannerNomad, tok.PlannerConsul)
	id := "acl-hello"
	job := helloJob(t, id, 5, 2)
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	// And a raw_exec job with the stanza in meta (the planner pins it
	// with its checkpoint dir).
	raw := rawExecJob(t, "acl-raw", 5, map[string]string{"themis.gpus": "1"})
	if _, _, err := nc.Jobs().Register(raw, nil); err != nil {
		t.Fatalf("register acl-raw: %v", err)
	}
	var jl *lease.JobLease
	eventually(t, 60*time.Second, "the job's lease", func() (bool, error) {
		jl = readKV[lease.JobLease](t, cc, lease.JobKey("default", id))
		return jl != nil && len(jl.GPUs) == 2, nil
	})
	for _, id := range []string{id, "acl-raw"} {
		eventually(t, 90*time.Second, id+" complete", func() (bool, error) {
			as, _, err := nc.Jobs().Allocations(id, true, nil)
			if err != nil {
				return false, err
			}
			for _, a := range as {
				if a.ClientStatus == "failed" {
					t.Fatalf("allocation %s failed: %+v\nplanner:\n%s", a.ID, a.TaskStates, p.output())
				}
				if a.ClientStatus == "complete" {
					return true, nil
				}
			}
			return false, nil
		})
	}
	// The driver (lease reads, progress writes) was refused nothing with
	// its token.
	if b, err := os.ReadFile(filepath.Join(st.DataDir(), "nomad.log")); err != nil {
		t.Fatal(err)
	} else if i := bytes.Index(bytes.ToLower(b), []byte("permission denied")); i >= 0 {
		t.Errorf("the Nomad agent's log (with the driver's) has a refusal: %s", b[max(0, i-300):min(len(b), i+200)])
	}
	p.stop(t)
	// Nothing the planner did was refused: its policies are enough.
	if out := p.output(); strings.Contains(strings.ToLower(out), "permission denied") {
		t.Errorf("the planner with its policies was refused something:\n%s", out)
	}

	// The read-only operator's tokens are enough for `themis check`; with
	// a Consul token that the agent does not know, it names the policy.
	for _, c := range []struct {
		consul string
		ok     bool
	}{{tok.OperatorConsul, true}, {"00000000-0000-0000-0000-000000000001", false}} {
		cmd := exec.Command(env.themis, "check", "-once", "-nomad-addr", st.NomadAddr(), "-consul-addr", st.ConsulAddr())
		cmd.Env = append(os.Environ(), "NOMAD_TOKEN="+tok.OperatorNomad, "CONSUL_HTTP_TOKEN="+c.consul)
		out, err := cmd.CombinedOutput()
		if c.ok && err != nil {
			t.Errorf("themis check -once with the operator's tokens: %v\n%s", err, out)
		}
		if !c.ok && (err == nil || !strings.Contains(string(out), "examples/acl/operator.consul.hcl")) {
			t.Errorf("themis check -once with an unknown Consul token: %v, output does not name operator.consul.hcl:\n%s", err, out)
		}
	}

	// A Consul token without write on themis/leases/: refused at start.
	rules, err := os.ReadFile(filepath.Join(env.root, "examples", "acl", "planner.consul.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	noLeases := strings.Replace(string(rules), "key_prefix \"themis/leases/\" {\n  policy = \"write\"", "key_prefix \"themis/leases/\" {\n  policy = \"read\"", 1)
	if noLeases == string(rules) {
		t.Fatal("planner.consul.hcl has no themis/leases/ write rule")
	}
	weak, err := st.ConsulPolicy(ctx, "planner-without-leases", noLeases)
	if err != nil {
		t.Fatal(err)
	}
	out := refusedPlanner(t, st, tok.PlannerNomad, weak)
	t.Logf("planner without themis/leases/ write:\n%s", out)
	for _, want := range []string{"Consul refused", `key_prefix "themis/leases/" { policy = "write" }`, "examples/acl/planner.consul.hcl", "docs/acl.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	// The read-only operator's Nomad token: refused (it cannot write the
	// pending node pool).
	out = refusedPlanner(t, st, tok.OperatorNomad, tok.PlannerConsul)
	t.Logf("planner with the operator's Nomad token:\n%s", out)
	for _, want := range []string{"Nomad refused", `node_pool "themis-pending" { policy = "write" }`, "examples/acl/planner.nomad.hcl"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
}

type themisPlanner struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (p *themisPlanner) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *themisPlanner) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startThemisPlanner runs `themis planner` against the agents at nomadAddr
// and consulAddr, whose raw_exec jobs checkpoint under dataDir's raw_exec
// root, with the tokens in NOMAD_TOKEN and CONSUL_HTTP_TOKEN, as an operator
// runs it, with flags added (e.g. -policy, -vc-config).
func startThemisPlanner(t *testing.T, nomadAddr, consulAddr, dataDir, nomadToken, consulToken string, flags ...string) *themisPlanner {
	t.Helper()
	p := &themisPlanner{done: make(chan error, 1)}
	p.cmd = exec.Command(env.themis, append([]string{"planner", "-nomad-addr", nomadAddr, "-consul-addr", consulAddr,
		"-http-addr", "", "-id", "acl-planner", "-resync", "5s", "-log-level", "debug",
		"-checkpoint-root", devstack.RawExecCheckpoints(dataDir)}, flags...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOMAD_") && !strings.HasPrefix(kv, "CONSUL_") {
			env = append(env, kv)
		}
	}
	p.cmd.Env = append(env, "NOMAD_TOKEN="+nomadToken, "CONSUL_HTTP_TOKEN="+consulToken)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		p.done <- nil
		if t.Failed() {
			t.Logf("themis planner output:\n%s", p.output())
		}
	})
	return p
}

func (p *themisPlanner) stop(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("themis planner: %v\n%s", err, p.output())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("themis planner did not stop in 20s")
	}
}

// refusedPlanner runs `themis planner` with the tokens and returns its
// output once it has exited with an error, as it must at once.
func refusedPlanner(t *testing.T, st *devstack.Stack, nomadToken, consulToken string) string {
	t.Helper()
	p := startThemisPlanner(t, st.NomadAddr(), st.ConsulAddr(), st.DataDir(), nomadToken, consulToken)
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil {
			t.Errorf("themis planner with a token that lacks a policy exited 0:\n%s", p.output())
		}
		return p.output()
	case <-time.After(20 * time.Second):
		t.Fatalf("themis planner with a token that lacks a policy still runs after 20s:\n%s", p.output())
		return ""
	}
}
