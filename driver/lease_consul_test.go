package driver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/lease"
)

// fakeConsul serves the two Consul HTTP endpoints ConsulLeases uses.
func fakeConsul(t *testing.T, leader string, kv map[string]any) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/status/leader":
			_ = json.NewEncoder(w).Encode(leader)
		case strings.HasPrefix(r.URL.Path, "/v1/kv/"):
			key := strings.TrimPrefix(r.URL.Path, "/v1/kv/")
			l, ok := kv[key]
			if !ok {
				http.NotFound(w, r)
				return
			}
			v, _ := json.Marshal(l)
			_ = json.NewEncoder(w).Encode([]*api.KVPair{{Key: key, Value: v, ModifyIndex: 7}})
		default:
			http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestConsulLeases(t *testing.T) {
	g0 := lease.GPULease{LeaseID: "l1", Namespace: "default", JobID: "train", GPU: "GPU-0"}
	revoke := &lease.Revoke{Reason: "preempted for default/te by fitgpp", Since: time.Unix(100, 0).UTC(), Deadline: time.Unix(130, 0).UTC()}
	addr := fakeConsul(t, "10.0.0.1:8300", map[string]any{
		lease.GPUKey("GPU-0"):              g0,
		lease.JobKey("default", "train"):   lease.JobLease{LeaseID: "l1", Namespace: "default", JobID: "train", Revoke: revoke},
		lease.JobKey("default", "corrupt"): "not a lease",
	})
	r, err := NewConsulLeases(addr)
	must.NoError(t, err)
	must.NoError(t, r.Ping(context.Background()))

	got, err := r.GPULeases(context.Background(), []string{"GPU-0", "GPU-1"})
	must.NoError(t, err)
	must.Eq(t, map[string]*lease.GPULease{"GPU-0": &g0}, got)
	must.NoError(t, lease.Verify("default", "train", []string{"GPU-0"}, got))
	must.Error(t, lease.Verify("default", "train", []string{"GPU-0", "GPU-1"}, got))

	jl, err := r.JobLease(context.Background(), "default", "train")
	must.NoError(t, err)
	must.Eq(t, revoke, jl.Revoke)
	jl, err = r.JobLease(context.Background(), "default", "other")
	must.NoError(t, err)
	must.Nil(t, jl)
	_, err = r.JobLease(context.Background(), "default", "corrupt")
	must.ErrorContains(t, err, "decode lease "+lease.JobKey("default", "corrupt"))

	noLeader, err := NewConsulLeases(fakeConsul(t, "", nil))
	must.NoError(t, err)
	must.ErrorContains(t, noLeader.Ping(context.Background()), "no leader")

	down, err := NewConsulLeases("127.0.0.1:1")
	must.NoError(t, err)
	must.Error(t, down.Ping(context.Background()))
	_, err = down.GPULeases(context.Background(), []string{"GPU-0"})
	must.ErrorContains(t, err, lease.GPUKey("GPU-0"))
}

// With the default Consul reader and no Consul, the driver must not claim to
// be healthy, or Nomad would place themis tasks it cannot check.
func TestFingerprint_ConsulUnreachable(t *testing.T) {
	e := newTestEnv(t, true, nil)
	cfg, _ := e.d.current()
	cfg.ConsulAddress = "127.0.0.1:1"
	var data []byte
	must.NoError(t, base.MsgPackEncode(&data, &cfg))
	must.NoError(t, e.h.SetConfig(&base.Config{PluginConfig: data}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := e.h.Fingerprint(ctx)
	must.NoError(t, err)
	select {
	case fp := <-ch:
		must.Eq(t, drivers.HealthStateUnhealthy, fp.Health)
		must.StrContains(t, fp.HealthDescription, "127.0.0.1:1")
	case <-time.After(10 * time.Second):
		t.Fatal("no fingerprint")
	}
}
