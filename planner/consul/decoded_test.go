package consul

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// A listing decodes only the values that are new or changed under their
// key: an unchanged listing decodes nothing (the same slices, or a fresh
// listing of the same bytes at new indexes), a changed value or a key that
// left and came back is decoded again, a value that cannot be used is not
// decoded again until it changes, a cache turned off and on again decodes
// what changed meanwhile, and what each listing hands out is what a
// listing without the cache hands out, with the listed pair's index.
func TestDecodeCacheDecodesEachValueOnce(t *testing.T) {
	pair := func(id, value string, index uint64) *api.KVPair {
		return &api.KVPair{Key: lease.RecordPrefix + "default/" + id, Value: []byte(value), ModifyIndex: index}
	}
	rec := func(id string, preemptions int) string {
		return fmt.Sprintf(`{"namespace":"default","job_id":%q,"preemptions":%d}`, id, preemptions)
	}
	var cache decodeCache
	var decodes uint64
	first := api.KVPairs{pair("a", rec("a", 1), 10), pair("b", rec("b", 2), 11), pair("c", `{not json`, 12)}
	for _, step := range []struct {
		name    string
		pairs   api.KVPairs
		decodes uint64
		off     bool // the cache turned off (SetDecodeCache)
	}{
		{"first listing", first, 3, false},
		{"the same listing again", first, 0, false},
		{"the same bytes listed afresh at new indexes",
			api.KVPairs{pair("a", rec("a", 1), 20), pair("b", rec("b", 2), 21), pair("c", `{not json`, 22)}, 0, false},
		{"a changed", api.KVPairs{pair("a", rec("a", 5), 30), pair("b", rec("b", 2), 21), pair("c", `{not json`, 22)}, 1, false},
		{"b deleted", api.KVPairs{pair("a", rec("a", 5), 30), pair("c", `{not json`, 22)}, 0, false},
		{"b back with its old value", api.KVPairs{pair("a", rec("a", 5), 30), pair("b", rec("b", 2), 40), pair("c", `{not json`, 22)}, 1, false},
		{"c fixed", api.KVPairs{pair("a", rec("a", 5), 30), pair("b", rec("b", 2), 40), pair("c", rec("c", 0), 50)}, 1, false},
		{"a names another job", api.KVPairs{pair("a", rec("b", 9), 60), pair("b", rec("b", 2), 40), pair("c", rec("c", 0), 50)}, 1, false},
		{name: "the cache off, c changed", off: true, decodes: 3,
			pairs: api.KVPairs{pair("a", rec("b", 9), 60), pair("b", rec("b", 2), 40), pair("c", rec("c", 7), 80)}},
		{name: "on again: c, changed while it was off, decoded", decodes: 1,
			pairs: api.KVPairs{pair("a", rec("b", 9), 60), pair("b", rec("b", 2), 40), pair("c", rec("c", 7), 80)}},
		{"everything deleted", api.KVPairs{}, 0, false},
		{"a back, then nothing else", api.KVPairs{pair("a", rec("a", 1), 70), nil}, 1, false},
	} {
		t.Run(step.name, func(t *testing.T) {
			cache.off = step.off
			got, gotBad := listRecords(&cache, step.pairs)
			want, wantBad := listRecords(nil, step.pairs)
			if got != want || gotBad != wantBad {
				t.Errorf("cached listing used %s, set aside %s; without the cache %s, %s", got, gotBad, want, wantBad)
			}
			if n := cache.decodes - decodes; n != step.decodes {
				t.Errorf("decoded %d values, want %d", n, step.decodes)
			}
			decodes = cache.decodes
			listed := 0
			for _, p := range step.pairs {
				if p != nil {
					listed++
				}
			}
			if kept := len(cache.m[lease.RecordPrefix].(map[string]decoded[lease.JobRecord])); kept != listed && !step.off {
				t.Errorf("cache keeps %d keys, the listing has %d", kept, listed)
			}
		})
	}
}

// listRecords lists pairs as Store.Records does, and says what it used
// (each record with its index) and which keys it set aside.
func listRecords(c *decodeCache, pairs api.KVPairs) (used, bad string) {
	var out []string
	var badKeys []string
	for _, b := range decodeCached(c, pairs, lease.RecordPrefix, lease.JobRecord.Key, func(r lease.JobRecord, index uint64) {
		out = append(out, fmt.Sprintf("%s@%d(preemptions %d)", r.Key(), index, r.Preemptions))
	}) {
		badKeys = append(badKeys, b.String())
	}
	slices.Sort(out)
	slices.Sort(badKeys)
	return strings.Join(out, " "), strings.Join(badKeys, "; ")
}

// Reading n job leases and n job records out of listings that did not
// change, as Store.Leases and Store.Records do after listing (byJob: the
// maps built each time), decoding every value (decodes=every) or only what
// changed (decodes=once, the cache warm from an earlier listing):
//
//	go test ./planner/consul -run '^$' -bench DecodeListings
func BenchmarkDecodeListings(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		leases, records := leaseAndRecordPairs(b, n)
		for _, mode := range []string{"every", "once"} {
			b.Run(fmt.Sprintf("n=%d/decodes=%s", n, mode), func(b *testing.B) {
				var c *decodeCache
				if mode == "once" {
					c = &decodeCache{}
					readLeasesAndRecords(b, c, leases, records, n)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					readLeasesAndRecords(b, c, leases, records, n)
				}
			})
		}
	}
}

func readLeasesAndRecords(b *testing.B, c *decodeCache, leases, records api.KVPairs, n int) {
	if ls, bad := byJob(c, leases, lease.JobPrefix(), leaseJob, nil); len(bad) > 0 || len(ls) != n {
		b.Fatalf("%d leases, bad %v", len(ls), bad)
	}
	if rs, bad := byJob(c, records, lease.RecordPrefix, lease.JobRecord.Key, lease.WithIndex); len(bad) > 0 || len(rs) != n {
		b.Fatalf("%d records, bad %v", len(rs), bad)
	}
}

// leaseAndRecordPairs is n job leases of 4 GPUs and n job records, as the
// planner writes them.
func leaseAndRecordPairs(tb testing.TB, n int) (leases, records api.KVPairs) {
	at := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("job-%05d", i)
		l := lease.JobLease{LeaseID: fmt.Sprintf("lease-%05d", i), Namespace: "default", JobID: id,
			NodeID: fmt.Sprintf("node-%04d", i/2), NodeName: fmt.Sprintf("sim-%04d", i/2), VC: "default", GrantedAt: at,
			SubmitIndex: uint64(1000 + i), Pinned: &lease.JobVersion{CreateIndex: uint64(1000 + i), Version: 1}}
		for g := range 4 {
			l.GPUs = append(l.GPUs, fmt.Sprintf("sim-%04d-gpu%d", i/2, 4*(i%2)+g))
		}
		v, err := l.Value()
		if err != nil {
			tb.Fatal(err)
		}
		leases = append(leases, &api.KVPair{Key: lease.JobKey("default", id), Value: v, ModifyIndex: uint64(2000 + i)})
		r, err := json.Marshal(lease.JobRecord{Namespace: "default", JobID: id, FirstSubmit: at, FirstStart: at.Add(time.Minute),
			Executed: 120, Attained: 480, Preemptions: 1, LastLease: l.LeaseID, Suspended: &lease.JobVersion{CreateIndex: 7, Version: 2}})
		if err != nil {
			tb.Fatal(err)
		}
		records = append(records, &api.KVPair{Key: lease.RecordKey(core.JobKey{Namespace: "default", ID: id}), Value: r, ModifyIndex: uint64(3000 + i)})
	}
	return leases, records
}
