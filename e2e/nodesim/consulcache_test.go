package nodesim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// The Consul store's cache of listings (planner/consul/cache.go) never
// hides a write: against a real Consul, a listing after each put, delete,
// write elsewhere in KV and delete of the last key says what a store
// without the cache says.
func TestConsulListCacheSeesEveryWrite(t *testing.T) {
	ctx := context.Background()
	cc := startConsulKV(t)
	cached, plain := consul.NewStore(cc), consul.NewStore(cc)
	plain.SetListCache(false)
	check := func(step string) {
		t.Helper()
		for range 2 { // the second listing comes from the cache
			got, err := cached.Records(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want, err := plain.Records(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(keys(got)) != fmt.Sprint(keys(want)) {
				t.Fatalf("%s: cached store lists %v, Consul has %v", step, keys(got), keys(want))
			}
		}
	}
	rec := func(id string) lease.JobRecord {
		return lease.JobRecord{Namespace: "default", JobID: id, FirstSubmit: time.Unix(1, 0)}
	}
	check("empty")
	for _, id := range []string{"a", "b", "c"} {
		if _, err := cached.PutRecord(ctx, rec(id)); err != nil {
			t.Fatal(err)
		}
		check("put " + id)
	}
	if err := plain.DeleteRecord(ctx, core.JobKey{Namespace: "default", ID: "b"}); err != nil {
		t.Fatal(err)
	}
	check("delete b")
	if _, err := cc.KV().Put(&consulapi.KVPair{Key: "elsewhere/x", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	check("a write elsewhere")
	for _, id := range []string{"a", "c"} {
		if err := plain.DeleteRecord(ctx, core.JobKey{Namespace: "default", ID: id}); err != nil {
			t.Fatal(err)
		}
		check("delete " + id)
	}
}

func keys(m map[core.JobKey]lease.JobRecord) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// startConsulKV starts a Consul of the test's own and returns a client of
// it.
func startConsulKV(tb testing.TB) *consulapi.Client {
	tb.Helper()
	agents := agentsDir(tb)
	templates, err := filepath.Abs("../../examples/agents")
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := devstack.StartConsul(context.Background(), devstack.Config{ConsulBin: filepath.Join(agents, "consul"), Templates: templates,
		DataDir: filepath.Join(tb.TempDir(), "consul"), Log: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cs.Stop)
	cfg := consulapi.DefaultConfig()
	cfg.Address = cs.ConsulAddr()
	cc, err := consulapi.NewClient(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return cc
}
