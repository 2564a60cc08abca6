package nodesim_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// Large values (planner/consul/packed.go): Themis's state after it grants
// 2,000 jobs of 4 GPUs on 1,000 nodes is far past Consul's 512 KiB limit
// on a transaction's body (written as it was, Consul refuses it: the
// scale run of Themis stopped there), and is written gzip'd, well under
// it, and read back the same; so is the auction's report. A small value
// stays JSON; a large JSON value written before packing reads as it is;
// a value too large even gzip'd is refused naming the servers' settings.
func TestLargeValuesPacked(t *testing.T) {
	ctx := context.Background()
	cc := startConsulKV(t)
	s := consul.NewStore(cc)

	state := themisStateAt(t, 1000, 2000)
	if _, _, _, err := cc.Txn().Txn(consulapi.TxnOps{{KV: &consulapi.KVTxnOp{Verb: consulapi.KVSet, Key: "plain/state", Value: state}}}, nil); err == nil ||
		!strings.Contains(err.Error(), "too large") {
		t.Fatalf("Consul took Themis's state of %d bytes as it is (%v): the test does not show the limit", len(state), err)
	}
	if err := s.PutPolicyState(ctx, "themis", state); err != nil {
		t.Fatalf("state of %d bytes: %v", len(state), err)
	}
	raw := rawValue(t, cc, lease.PolicyKey("themis"))
	if !bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) || len(raw) > 384<<10 {
		t.Fatalf("stored state: %d bytes, gzip'd %v; want gzip'd under 384 KiB", len(raw), bytes.HasPrefix(raw, []byte{0x1f, 0x8b}))
	}
	got, err := s.PolicyState(ctx, "themis")
	if err != nil || !bytes.Equal(got, state) {
		t.Fatalf("state read back: %d bytes, %v; want the %d written", len(got), err, len(state))
	}
	t.Logf("Themis's state at 2,000 jobs: %d bytes of JSON, %d stored", len(state), len(raw))

	report := bytes.Repeat([]byte(`{"app":"default/run-00000","gpus":4,"rho":0.5},`), 8000)
	report = append(append([]byte("["), report[:len(report)-1]...), ']')
	if err := s.PutAuction(ctx, report); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Auction(ctx); err != nil || !bytes.Equal(got, report) {
		t.Fatalf("auction read back: %d bytes, %v; want the %d written", len(got), err, len(report))
	}

	small := []byte(`{"leases":{}}`)
	if err := s.PutPolicyState(ctx, "small", small); err != nil {
		t.Fatal(err)
	}
	if raw := rawValue(t, cc, lease.PolicyKey("small")); !bytes.Equal(raw, small) {
		t.Fatalf("a small state is stored as %q, want it as JSON", raw)
	}

	legacy := append([]byte(`{"x":"`), append(bytes.Repeat([]byte("y"), 100<<10), `"}`...)...)
	if _, err := cc.KV().Put(&consulapi.KVPair{Key: lease.PolicyKey("legacy"), Value: legacy}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.PolicyState(ctx, "legacy"); err != nil || !bytes.Equal(got, legacy) {
		t.Fatalf("a large JSON state written before packing: %d bytes, %v", len(got), err)
	}

	noise := make([]byte, 600<<10)
	_, _ = rand.Read(noise)
	err = s.PutPolicyState(ctx, "noise", noise)
	if err == nil || !strings.Contains(err.Error(), "kv_max_value_size") {
		t.Fatalf("600 KiB that gzip cannot shrink: %v, want a refusal naming kv_max_value_size", err)
	}
}

// themisStateAt is Themis's state after its first decision on nodes nodes
// of 8 GPUs, 40 to a rack, with jobs jobs of 4 GPUs.
func themisStateAt(t *testing.T, nodes, jobs int) []byte {
	t.Helper()
	p := arbiter.New(0.8, 600, nil)
	p.EarlyEnd = true
	var ns []core.Node
	for i := range nodes {
		n := core.Node{ID: fmt.Sprintf("%08d-5f1c-4a6e-8b7d-9c0e1f23a4b5", i), Name: fmt.Sprintf("sim-%04d", i), Rack: fmt.Sprintf("rack-%02d", i/40), Schedulable: true}
		for g := range 8 {
			n.GPUs = append(n.GPUs, core.GPU{ID: fmt.Sprintf("GPU-%08d-%d-4a6e-8b7d-9c0e1f23", i, g), Index: g, Healthy: true})
		}
		ns = append(ns, n)
	}
	var js []core.Job
	for i := range jobs {
		js = append(js, core.Job{Key: core.JobKey{Namespace: "default", ID: fmt.Sprintf("run-%05d", i)}, GPUs: 4, Remaining: -1, Seq: uint64(i)})
	}
	d := core.Scheduler{Policy: p}.Decide(core.State{Nodes: ns, Jobs: js}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	if len(d.Actions) != jobs {
		t.Fatalf("Themis granted %d of %d jobs", len(d.Actions), jobs)
	}
	b, err := p.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawValue is key's value as Consul holds it.
func rawValue(t *testing.T, cc *consulapi.Client, key string) []byte {
	t.Helper()
	p, _, err := cc.KV().Get(key, nil)
	if err != nil || p == nil {
		t.Fatalf("read %s: %v (present %v)", key, err, p != nil)
	}
	return p.Value
}
