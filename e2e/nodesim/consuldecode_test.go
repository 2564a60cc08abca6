package nodesim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// The Consul store's cache of decoded values (planner/consul/decoded.go)
// never hides a write: against a real Consul, after each write (the
// store's own transactions, plain puts, check-and-set, deletes, a
// transaction of raw KV operations, a value rewritten unchanged, a value
// that cannot be used and its deletion) every reader of a store with both
// caches says what a store with neither says, records' indexes included;
// it decodes exactly the values the write changed, and a second read over
// the unchanged store decodes nothing. Changing the maps and plain fields
// a read returns changes nothing the next read returns.
func TestConsulDecodeCacheSeesEveryWrite(t *testing.T) {
	ctx := context.Background()
	cc := startConsulKV(t)
	cached, plain := consul.NewStore(cc), consul.NewStore(cc)
	plain.SetListCache(false)
	plain.SetDecodeCache(false)
	a, b, c := core.JobKey{Namespace: "default", ID: "a"}, core.JobKey{Namespace: "default", ID: "b"}, core.JobKey{Namespace: "team", ID: "c/d"}
	at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	granted := lease.JobLease{LeaseID: "lease-a", Namespace: a.Namespace, JobID: a.ID, NodeID: "n1", NodeName: "node-1",
		GPUs: []string{"g1", "g2"}, VC: "default", GrantedAt: at, Pinned: &lease.JobVersion{CreateIndex: 5, Version: 1}}
	put := func(key, value string) {
		t.Helper()
		if _, err := cc.KV().Put(&consulapi.KVPair{Key: key, Value: []byte(value)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	recordOf := func(k core.JobKey) lease.JobRecord {
		t.Helper()
		recs, err := cached.Records(ctx)
		if _, err := consul.Unreadable(err); err != nil {
			t.Fatal(err)
		}
		return recs[k]
	}
	for _, step := range []struct {
		name    string
		write   func()
		decodes uint64
	}{
		{"empty", func() {}, 0},
		{"grant (a transaction of the job key and its GPU keys)", func() { must(cached.Grant(ctx, granted)) }, 1},
		{"a new record (check-and-set 0)", func() {
			_, err := cached.PutRecord(ctx, lease.JobRecord{Namespace: a.Namespace, JobID: a.ID, FirstSubmit: at})
			must(err)
		}, 1},
		{"the record changed (check-and-set on its index)", func() {
			r := recordOf(a)
			r.Preemptions = 3
			_, err := cached.PutRecord(ctx, r)
			must(err)
		}, 1},
		{"revoke (check-and-set on the lease)", func() {
			_, err := cached.Revoke(ctx, granted, lease.Revoke{Reason: "preempted", Since: at, Deadline: at.Add(time.Minute)})
			must(err)
		}, 1},
		{"the versions recorded on the lease", func() {
			l := granted
			l.Revoke = &lease.Revoke{Suspends: &lease.JobVersion{CreateIndex: 5, Version: 2}}
			_, err := cached.SetVersions(ctx, l)
			must(err)
		}, 1},
		{"a plain put of a record", func() {
			put(lease.RecordKey(b), `{"namespace":"default","job_id":"b","first_submit":"2026-11-29T00:00:00Z","preemptions":1}`)
		}, 1},
		{"the record rewritten unchanged (check-and-set)", func() {
			p, _, err := cc.KV().Get(lease.RecordKey(b), nil)
			must(err)
			ok, _, err := cc.KV().CAS(&consulapi.KVPair{Key: p.Key, Value: p.Value, ModifyIndex: p.ModifyIndex}, nil)
			must(err)
			if !ok {
				t.Fatal("check-and-set on the index just read failed")
			}
		}, 0},
		{"a transaction of raw KV writes: a checkpoint, a progress record and a pending grant", func() {
			ok, resp, _, err := cc.Txn().Txn(consulapi.TxnOps{
				{KV: &consulapi.KVTxnOp{Verb: consulapi.KVSet, Key: lease.CheckpointKey(a.Namespace, a.ID),
					Value: []byte(`{"namespace":"default","job_id":"a","name":"ckpt-1","time":"2026-11-29T00:30:00Z","alloc_id":"x"}`)}},
				{KV: &consulapi.KVTxnOp{Verb: consulapi.KVSet, Key: lease.ProgressKey(a.Namespace, a.ID),
					Value: []byte(`{"namespace":"default","job_id":"a","alloc_id":"x","iteration":10,"total":100,"loss":0.5,"at":"2026-11-29T00:30:00Z"}`)}},
				{KV: &consulapi.KVTxnOp{Verb: consulapi.KVSet, Key: lease.PendingKey(c.Namespace, c.ID),
					Value: []byte(`{"namespace":"team","job_id":"c/d","node":"n1","gpus":["g1","g2"],"decided_at":"2026-11-29T00:30:00Z"}`)}},
			}, nil)
			must(err)
			if !ok {
				t.Fatalf("transaction rolled back: %+v", resp.Errors)
			}
		}, 3},
		{"a pending grant written by the store", func() {
			must(cached.PutPending(ctx, lease.Pending{Namespace: b.Namespace, JobID: b.ID, Node: "n2", GPUs: []string{"g3"}, DecidedAt: at}))
		}, 1},
		{"a record that does not decode", func() { put(lease.RecordKey(c), `{not json`) }, 1},
		{"a record that names another job", func() { put(lease.RecordKey(c), `{"namespace":"default","job_id":"a"}`) }, 1},
		{"a write elsewhere in KV", func() { put("elsewhere/x", "1") }, 0},
		{"release with the record (a transaction of deletes and a check-and-set)", func() {
			ls, err := cached.Leases(ctx)
			must(err)
			r := recordOf(a)
			r.Preemptions++
			must(cached.Release(ctx, ls[a], &r))
		}, 1},
		{"the records of b deleted (a transaction)", func() { must(cached.DeleteRecord(ctx, b)) }, 0},
		{"a pending grant deleted", func() { must(cached.DeletePending(ctx, b)) }, 0},
		{"the record that cannot be used deleted (a plain delete)", func() {
			_, err := cc.KV().Delete(lease.RecordKey(c), nil)
			must(err)
		}, 0},
		{"a record back under a deleted key, as it was", func() {
			put(lease.RecordKey(b), `{"namespace":"default","job_id":"b","first_submit":"2026-11-29T00:00:00Z","preemptions":1}`)
		}, 1},
		{"the whole tree deleted", func() {
			_, err := cc.KV().DeleteTree("themis/", nil)
			must(err)
		}, 0},
	} {
		step.write()
		want := readKV(t, plain)
		before := cached.Decodes()
		got := readKV(t, cached)
		if n := cached.Decodes() - before; n != step.decodes {
			t.Errorf("%s: the cached store decoded %d values, want %d", step.name, n, step.decodes)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the cached store reads\n%+v\nConsul has\n%+v", step.name, got, want)
		}
		got.scribble()
		before = cached.Decodes()
		again := readKV(t, cached)
		if n := cached.Decodes() - before; n != 0 {
			t.Errorf("%s: reading the unchanged store again decoded %d values", step.name, n)
		}
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("%s: read again, the cached store reads\n%+v\nConsul has\n%+v", step.name, again, want)
		}
	}
	if plain.Decodes() == 0 {
		t.Error("the store without the cache counted no decodes")
	}
}

// kvRead is what a round reads through the store's listings.
type kvRead struct {
	Leases      map[core.JobKey]lease.JobLease
	Records     map[core.JobKey]lease.JobRecord
	Checkpoints map[core.JobKey]lease.CheckpointRecord
	Progress    map[core.JobKey]lease.ProgressRecord
	Pending     map[core.JobKey]lease.Pending
	Bad         []string
}

func readKV(t *testing.T, s *consul.Store) kvRead {
	t.Helper()
	ctx := context.Background()
	var r kvRead
	check := func(err error) {
		t.Helper()
		bad, err := consul.Unreadable(err)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			r.Bad = append(r.Bad, b.String())
		}
	}
	var err error
	r.Leases, err = s.Leases(ctx)
	check(err)
	r.Records, err = s.Records(ctx)
	check(err)
	r.Checkpoints, err = s.Checkpoints(ctx)
	check(err)
	r.Progress, err = s.Progress(ctx)
	check(err)
	r.Pending, err = s.Pending(ctx)
	check(err)
	slices.Sort(r.Bad)
	return r
}

// scribble changes what the rule of decoded.go lets a caller change: the
// maps a read returned, and the plain fields of the values in them.
func (r kvRead) scribble() {
	for k, l := range r.Leases {
		l.NodeName, l.GPUs, l.Revoke = "scribbled", nil, nil
		r.Leases[k] = l
		r.Leases[core.JobKey{Namespace: "scribbled", ID: k.ID}] = l
	}
	for k, rec := range r.Records {
		rec.Preemptions += 100
		rec.Suspended = nil
		r.Records[k] = rec
	}
	for k := range r.Pending {
		delete(r.Pending, k)
	}
	for k, p := range r.Progress {
		p.Loss = nil
		r.Progress[k] = p
	}
	clear(r.Checkpoints)
}

func (r kvRead) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "leases %v records %v checkpoints %v progress %v pending %v bad %v", r.Leases, r.Records, r.Checkpoints, r.Progress, r.Pending, r.Bad)
	return b.String()
}

// Reading n job leases and n job records from a real Consul that does not
// change, as a round's readStore does (Store.Leases, then Store.Records),
// three ways in one run: listing and decoding everything (caches=none, as
// before #35), reusing the listing while Consul's KV index stands but
// decoding every value (caches=listings, before decoded.go), and reusing
// the decoded values too (caches=listings+decodes):
//
//	go test ./e2e/nodesim -run '^$' -bench ConsulRead -benchtime 20x
func BenchmarkConsulRead(b *testing.B) {
	cc := startConsulKV(b)
	ctx := context.Background()
	written := 0
	for _, n := range []int{1000, 10000} {
		writeLeasesAndRecords(b, cc, written, n)
		written = n
		for _, mode := range []string{"none", "listings", "listings+decodes"} {
			b.Run(fmt.Sprintf("n=%d/caches=%s", n, mode), func(b *testing.B) {
				s := consul.NewStore(cc)
				s.SetListCache(mode != "none")
				s.SetDecodeCache(mode == "listings+decodes")
				read := func() {
					ls, err := s.Leases(ctx)
					if err != nil || len(ls) != n {
						b.Fatalf("%d leases: %v", len(ls), err)
					}
					rs, err := s.Records(ctx)
					if err != nil || len(rs) != n {
						b.Fatalf("%d records: %v", len(rs), err)
					}
				}
				read() // what a round before the measured ones read
				d0 := s.Decodes()
				b.ResetTimer()
				for range b.N {
					read()
				}
				b.ReportMetric(float64(s.Decodes()-d0)/float64(b.N), "decodes/op")
			})
		}
	}
}

// writeLeasesAndRecords writes the job leases (4 GPUs each, as
// lease.JobLease.Value writes them) and job records of jobs from to n-1,
// in transactions of 64 keys.
func writeLeasesAndRecords(b *testing.B, cc *consulapi.Client, from, n int) {
	b.Helper()
	at := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	var ops consulapi.TxnOps
	flush := func() {
		if len(ops) == 0 {
			return
		}
		ok, resp, _, err := cc.Txn().Txn(ops, nil)
		if err != nil || !ok {
			b.Fatalf("write leases and records: %v %+v", err, resp)
		}
		ops = ops[:0]
	}
	for i := from; i < n; i++ {
		id := fmt.Sprintf("job-%05d", i)
		l := lease.JobLease{LeaseID: fmt.Sprintf("lease-%05d", i), Namespace: "default", JobID: id,
			NodeID: fmt.Sprintf("node-%04d", i/2), NodeName: fmt.Sprintf("sim-%04d", i/2), VC: "default", GrantedAt: at,
			SubmitIndex: uint64(1000 + i), Pinned: &lease.JobVersion{CreateIndex: uint64(1000 + i), Version: 1}}
		for g := range 4 {
			l.GPUs = append(l.GPUs, fmt.Sprintf("sim-%04d-gpu%d", i/2, 4*(i%2)+g))
		}
		lv, err := l.Value()
		if err != nil {
			b.Fatal(err)
		}
		rv, err := json.Marshal(lease.JobRecord{Namespace: "default", JobID: id, FirstSubmit: at, FirstStart: at.Add(time.Minute),
			Executed: 120, Attained: 480, Preemptions: 1, LastLease: l.LeaseID, Suspended: &lease.JobVersion{CreateIndex: 7, Version: 2}})
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops,
			&consulapi.TxnOp{KV: &consulapi.KVTxnOp{Verb: consulapi.KVSet, Key: lease.JobKey("default", id), Value: lv}},
			&consulapi.TxnOp{KV: &consulapi.KVTxnOp{Verb: consulapi.KVSet, Key: lease.RecordKey(core.JobKey{Namespace: "default", ID: id}), Value: rv}})
		if len(ops) >= 64 {
			flush()
		}
	}
	flush()
}
