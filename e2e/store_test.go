package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// A Consul of its own: the shared stack's planner would release leases of
// jobs that do not exist in Nomad, which is exactly what these leases are.
func privateConsul(t *testing.T) *consulapi.Client {
	t.Helper()
	cfg := consulapi.DefaultConfig()
	cfg.Address = privateConsulAddr(t)
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// privateConsulAddr starts a Consul of the test's own and returns its HTTP
// address.
func privateConsulAddr(t *testing.T) string {
	t.Helper()
	agents, err := agentsDir(env.root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := devstack.StartConsul(context.Background(), devstack.Config{
		ConsulBin: filepath.Join(agents, "consul"), Templates: filepath.Join(env.root, "examples", "agents"),
		DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	return st.ConsulAddr()
}

func keys(t *testing.T, c *consulapi.Client) []string {
	t.Helper()
	ks, _, err := c.KV().Keys(lease.Root+"leases/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// Grants are all-or-nothing and exclusive per GPU; releases remove exactly
// the released lease's keys.
func TestLeaseTransactions(t *testing.T) {
	c := privateConsul(t)
	s := consul.NewStore(c)
	ctx := context.Background()
	now := time.Now().UTC()
	a := lease.JobLease{LeaseID: "A", Namespace: "default", JobID: "a", NodeID: "n", GPUs: []string{"g0", "g1"}, GrantedAt: now}
	b := lease.JobLease{LeaseID: "B", Namespace: "default", JobID: "b", NodeID: "n", GPUs: []string{"g2", "g1"}, GrantedAt: now}
	c2 := lease.JobLease{LeaseID: "C", Namespace: "default", JobID: "c", NodeID: "n", GPUs: []string{"g2", "g3"}, GrantedAt: now}

	if err := s.Grant(ctx, a); err != nil {
		t.Fatal(err)
	}
	err := s.Grant(ctx, b)
	if err == nil || !strings.Contains(err.Error(), lease.GPUKey("g1")) {
		t.Fatalf("a grant of an already leased GPU: err = %v, want it to name %s", err, lease.GPUKey("g1"))
	}
	if got := keys(t, c); len(got) != 3 {
		t.Fatalf("the failed grant left keys behind: %v", got)
	}
	if err := s.Grant(ctx, a); err == nil {
		t.Fatal("granting the same job twice succeeded")
	}
	if err := s.Grant(ctx, c2); err != nil {
		t.Fatal(err)
	}
	ls, err := s.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[core.JobKey{Namespace: "default", ID: "a"}].LeaseID != "A" || ls[core.JobKey{Namespace: "default", ID: "c"}].GPUs[1] != "g3" {
		t.Fatalf("leases %+v", ls)
	}
	if err := s.Release(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, c); len(got) != 3 || !strings.Contains(strings.Join(got, " "), "g3") {
		t.Fatalf("after releasing a, keys %v", got)
	}
	if err := s.Release(ctx, a, nil); err != nil {
		t.Fatalf("releasing twice is a no-op, got %v", err)
	}
	if err := s.Release(ctx, c2, nil); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, c); len(got) != 0 {
		t.Fatalf("keys left after releasing everything: %v", got)
	}
}

// Only one planner leads; the standby takes over when the leader lets go.
func TestLeaderLock(t *testing.T) {
	c := privateConsul(t)
	s := consul.NewStore(c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lctx, release, err := s.Lead(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		_, rel, err := s.Lead(ctx, "two")
		if err == nil {
			defer rel()
		}
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the standby took the lock while the leader held it (err %v)", err)
	case <-time.After(2 * time.Second):
	}
	release()
	if lctx.Err() == nil {
		t.Fatal("the leader's context is still live after it released the lock")
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the standby did not take over")
	}
}

// The leader lock records the leading planner's API, which a standby names;
// nobody leads once it lets go.
func TestLeaderRecordsItsAPI(t *testing.T) {
	c := privateConsul(t)
	s := consul.NewStore(c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, ok, err := s.Leader(ctx); err != nil || ok {
		t.Fatalf("before anyone leads: ok %v, err %v", ok, err)
	}
	_, release, err := s.LeadAs(ctx, consul.LeaderInfo{ID: "one", API: "http://127.0.0.1:4680"}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	l, ok, err := s.Leader(ctx)
	if err != nil || !ok || l.ID != "one" || l.API != "http://127.0.0.1:4680" {
		t.Fatalf("leader %+v ok %v err %v, want one at http://127.0.0.1:4680", l, ok, err)
	}
	release()
	if l, ok, err := s.Leader(ctx); err != nil || ok {
		t.Fatalf("after release: %+v ok %v err %v, want nobody", l, ok, err)
	}
}

// The fence: once a leader's session is gone (its liveness check went
// critical, or here an operator destroyed it), none of its writes commit,
// even before it notices; the planner that leads next writes as usual.
func TestFenceRefusesADeposedLeader(t *testing.T) {
	c := privateConsul(t)
	first, second := consul.NewStore(c), consul.NewStore(c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pending := func(s *consul.Store, job string) error {
		return s.PutPending(ctx, lease.Pending{Namespace: "default", JobID: job, Node: "n1", GPUs: []string{"g1"}})
	}
	lctx, release, err := first.LeadAs(ctx, consul.LeaderInfo{ID: "first"}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := pending(first, "a"); err != nil {
		t.Fatalf("the leader's write: %v", err)
	}
	kv, _, err := c.KV().Get(lease.LeaderKey, nil)
	if err != nil || kv == nil || kv.Session == "" {
		t.Fatalf("leader key %+v, %v", kv, err)
	}
	if _, err := c.Session().Destroy(kv.Session, nil); err != nil {
		t.Fatal(err)
	}
	if err := pending(first, "b"); !errors.Is(err, consul.ErrNotLeader) {
		t.Fatalf("the deposed leader's write: %v, want ErrNotLeader", err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the deposed leader's context is still live")
	}
	_, release2, err := second.LeadAs(ctx, consul.LeaderInfo{ID: "second"}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if err := pending(second, "c"); err != nil {
		t.Fatalf("the new leader's write: %v", err)
	}
	if err := pending(first, "d"); !errors.Is(err, consul.ErrNotLeader) {
		t.Fatalf("the old leader's write after the new one leads: %v, want ErrNotLeader", err)
	}
	for job, want := range map[string]bool{"a": true, "b": false, "c": true, "d": false} {
		kv, _, err := c.KV().Get(lease.PendingKey("default", job), nil)
		if err != nil || (kv != nil) != want {
			t.Errorf("pending grant of %s written: %v (err %v), want %v", job, kv != nil, err, want)
		}
	}
}
