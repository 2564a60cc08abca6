package consul

import (
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// A listing uses every value that decodes and names its key's job, and
// names each other key, with the job its key names, instead of failing
// whole (docs/adversary.md, part 1).
func TestListSetsAsideWhatItCannotUse(t *testing.T) {
	pre := lease.ProgressPrefix()
	pairs := api.KVPairs{
		{Key: lease.ProgressKey("default", "good"), Value: []byte(`{"namespace":"default","job_id":"good","iteration":3}`)},
		{Key: lease.ProgressKey("default", "garbage"), Value: []byte(`{not json`)},
		{Key: lease.ProgressKey("default", "array"), Value: []byte(`[]`)},
		{Key: lease.ProgressKey("default", "liar"), Value: []byte(`{"namespace":"default","job_id":"good","iteration":1000000}`)},
		{Key: lease.ProgressKey("team", "x/allocations"), Value: []byte(`{"namespace":"team","job_id":"x/allocations","iteration":1}`)},
		{Key: pre + "no-job-part", Value: []byte(`{}`)},
		nil,
	}
	got := map[core.JobKey]lease.ProgressRecord{}
	bad := decodeEach(pairs, pre, func(p lease.ProgressRecord) core.JobKey { return core.JobKey{Namespace: p.Namespace, ID: p.JobID} },
		func(p lease.ProgressRecord, _ uint64) { got[core.JobKey{Namespace: p.Namespace, ID: p.JobID}] = p })
	if len(got) != 2 || got[core.JobKey{Namespace: "default", ID: "good"}].Iteration != 3 || got[core.JobKey{Namespace: "team", ID: "x/allocations"}].Iteration != 1 {
		t.Errorf("used %+v, want good (iteration 3, not the liar's) and team/x/allocations", got)
	}
	want := map[string]string{
		lease.ProgressKey("default", "garbage"): "default/garbage does not decode",
		lease.ProgressKey("default", "array"):   "default/array does not decode",
		lease.ProgressKey("default", "liar"):    "default/liar its value names job default/good, its key default/liar",
		pre + "no-job-part":                     "/ key names no job",
	}
	if len(bad) != len(want) {
		t.Fatalf("bad keys %v, want %d", bad, len(want))
	}
	for _, b := range bad {
		w, ok := want[b.Key]
		if !ok {
			t.Errorf("unexpected bad key %s", b)
			continue
		}
		job, msg, _ := strings.Cut(w, " ")
		if b.Job.String() != job || !strings.Contains(b.Err.Error(), msg) {
			t.Errorf("%s: job %s, error %v; want %s, %q", b.Key, b.Job, b.Err, job, msg)
		}
	}
	keys, err := Unreadable(&UnreadableError{Keys: bad})
	if err != nil || len(keys) != len(bad) {
		t.Errorf("Unreadable split %v, %v", keys, err)
	}
}

// The decoding of any key and value: it never panics, and what it uses
// names the job its key names.
//
//	go test ./planner/consul -run '^$' -fuzz FuzzDecodeEach -fuzztime 30s
func FuzzDecodeEach(f *testing.F) {
	f.Add(lease.RecordPrefix+"default/a", []byte(`{"namespace":"default","job_id":"a","first_submit":"2026-11-24T10:00:00Z"}`))
	f.Add(lease.RecordPrefix+"default/a%2Fb", []byte(`{"namespace":"default","job_id":"a/b"}`))
	f.Add(lease.RecordPrefix+"default/a", []byte(`{"namespace":"default","job_id":"b"}`))
	f.Add(lease.RecordPrefix+"%zz/a", []byte(`{}`))
	f.Add(lease.RecordPrefix, []byte(`null`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		bad := decodeEach(api.KVPairs{{Key: key, Value: value}}, lease.RecordPrefix, lease.JobRecord.Key, func(r lease.JobRecord, _ uint64) {
			k, err := KeyJob(lease.RecordPrefix, key)
			if err != nil || r.Key() != k {
				t.Fatalf("used record %+v under key %q (%v)", r, key, err)
			}
		})
		for _, b := range bad {
			if b.Key != key || b.Err == nil {
				t.Fatalf("bad key %+v for %q", b, key)
			}
		}
	})
}
