package consul

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// A listing decodes only the values that are new or changed under their
// key: an unchanged listing decodes nothing (the same slices, or a fresh
// listing of the same bytes at new indexes), a changed value or a key that
// left and came back is decoded again, a value that cannot be used is not
// decoded again until it changes, and what each listing hands out is what
// a listing without the cache hands out, with the listed pair's index.
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
	}{
		{"first listing", first, 3},
		{"the same listing again", first, 0},
		{"the same bytes listed afresh at new indexes",
			api.KVPairs{pair("a", rec("a", 1), 20), pair("b", rec("b", 2), 21), pair("c", `{not json`, 22)}, 0},
		{"a changed", api.KVPairs{pair("a", rec("a", 5), 30), pair("b", rec("b", 2), 21), pair("c", `{not json`, 22)}, 1},
		{"b deleted", api.KVPairs{pair("a", rec("a", 5), 30), pair("c", `{not json`, 22)}, 0},
		{"b back with its old value", api.KVPairs{pair("a", rec("a", 5), 30), pair("b", rec("b", 2), 40), pair("c", `{not json`, 22)}, 1},
		{"c fixed", api.KVPairs{pair("a", rec("a", 5), 30), pair("b", rec("b", 2), 40), pair("c", rec("c", 0), 50)}, 1},
		{"a names another job", api.KVPairs{pair("a", rec("b", 9), 60), pair("b", rec("b", 2), 40), pair("c", rec("c", 0), 50)}, 1},
		{"everything deleted", api.KVPairs{}, 0},
		{"a back, then nothing else", api.KVPairs{pair("a", rec("a", 1), 70), nil}, 1},
	} {
		t.Run(step.name, func(t *testing.T) {
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
			if kept := len(cache.m[lease.RecordPrefix].(map[string]decoded[JobRecord])); kept != listed {
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
	for _, b := range decodeCached(c, pairs, lease.RecordPrefix, JobRecord.Key, func(r JobRecord, index uint64) {
		out = append(out, fmt.Sprintf("%s@%d(preemptions %d)", r.Key(), index, r.Preemptions))
	}) {
		badKeys = append(badKeys, b.String())
	}
	slices.Sort(out)
	slices.Sort(badKeys)
	return strings.Join(out, " "), strings.Join(badKeys, "; ")
}
