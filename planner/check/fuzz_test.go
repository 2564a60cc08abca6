package check

import (
	"encoding/json"
	"net/url"
	"slices"
	"testing"
)

// The decoders never panic, accept only values that agree with their key,
// and what they accept survives a round trip through JSON.
func FuzzDecodeKeys(f *testing.F) {
	f.Add(JobLeasePath+"default/a", []byte(`{"lease_id":"L","namespace":"default","job_id":"a","node_id":"n","node_name":"node-1","gpus":["g0","g1"],"granted_at":"2026-11-24T10:00:00Z","submit_index":7}`))
	f.Add(JobLeasePath+"default/a", []byte(`{"lease_id":"L","namespace":"default","job_id":"a","gpus":["g0"],"revoke":{"reason":"preempted","since":"2026-11-24T10:00:00Z","deadline":"2026-11-24T10:00:30Z"}}`))
	f.Add(JobLeasePath+"default/gang", []byte(`{"lease_id":"L","namespace":"default","job_id":"gang","parts":[{"node_id":"n0","node_name":"node-0","gpus":["a"]},{"node_id":"n1","node_name":"node-1","gpus":["b"]}]}`))
	f.Add(JobLeasePath+"ns%2Fx/j%20b", []byte(`{"lease_id":"L","namespace":"ns/x","job_id":"j b","gpus":["g"]}`))
	f.Add(GPULeasePath+"SIM-dev-node-0", []byte(`{"lease_id":"L","namespace":"default","job_id":"a","node_id":"n","gpu":"SIM-dev-node-0","granted_at":"2026-11-24T10:00:00Z"}`))
	f.Add(GPULeasePath+"GPU%2F1", []byte(`{"lease_id":"L","namespace":"default","job_id":"a","gpu":"GPU/1"}`))
	f.Add(StatusPath+"default/a", []byte(`{"state":"revoking","reason":"preempted","deadline":"2026-11-24T10:00:30Z","since":"2026-11-24T10:00:00Z"}`))
	f.Add(JobLeasePath+"default/a", []byte(`{"gpus":null}`))
	f.Add(GPULeasePath, []byte(`[]`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		if l, err := DecodeJobLease(key, value); err == nil {
			ns, job, kerr := splitJobKey(key, JobLeasePath)
			if kerr != nil || l.Namespace != ns || l.JobID != job || l.LeaseID == "" || len(l.AllGPUs()) == 0 {
				t.Fatalf("accepted job lease %+v under key %q", l, key)
			}
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeJobLease(key, b)
			if err != nil || again.LeaseID != l.LeaseID || !slices.Equal(again.AllGPUs(), l.AllGPUs()) ||
				(again.Revoke == nil) != (l.Revoke == nil) || len(again.Parts) != len(l.Parts) {
				t.Fatalf("round trip of %+v: %+v, %v", l, again, err)
			}
		}
		if g, err := DecodeGPULease(key, value); err == nil {
			if esc := GPULeasePath + url.PathEscape(g.GPU); g.GPUField != g.GPU || g.JobID == "" || g.LeaseID == "" {
				t.Fatalf("accepted GPU lease %+v under key %q (%s)", g, key, esc)
			}
			b, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := DecodeGPULease(key, b); err != nil || again.Ref() != g.Ref() || again.GPU != g.GPU {
				t.Fatalf("round trip of %+v: %+v, %v", g, again, err)
			}
		}
		if ref, st, err := DecodeStatus(key, value); err == nil {
			if ref.Namespace == "" || ref.ID == "" {
				t.Fatalf("status under key %q for job %+v", key, ref)
			}
			b, _ := json.Marshal(st)
			if _, again, err := DecodeStatus(key, b); err != nil || again.State != st.State || !again.Since.Equal(st.Since) {
				t.Fatalf("round trip of %+v: %+v, %v", st, again, err)
			}
		}
	})
}
