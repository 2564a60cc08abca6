package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Value is the job lease as the planner stores it in Consul: indented JSON
// (Consul's UI shows a key's value as it is, so one long line would be all
// an operator sees) whose first fields are the ones looked for first: the
// lease's state ("granted", as the views name its job's, or "revoking"
// while it is taken back), the job,
// its virtual cluster, GPUs and node, when it was granted, when it ends (a
// lease for a time), the revoke with its deadline; then every other field
// in its usual order. "state" and "job" are written for readers only:
// decoding the value into a JobLease ignores them.
func (j JobLease) Value() ([]byte, error) {
	state := "granted"
	if j.Revoke != nil {
		state = "revoking"
	}
	return ordered(j, []field{{"state", state}, {"job", j.Namespace + "/" + j.JobID}},
		"vc", "gpus", "node_name", "granted_at", "ends", "revoke")
}

// Value is the GPU lease as stored in Consul: indented JSON, the job first.
func (g GPULease) Value() ([]byte, error) {
	return ordered(g, []field{{"job", g.Namespace + "/" + g.JobID}}, "gpu", "vc", "node_name", "granted_at")
}

type field struct {
	key   string
	value any
}

// ordered writes v's JSON object as indented JSON: the extra fields, then
// v's fields named in first (those it has), then its others in their order.
func ordered(v any, extra []field, first ...string) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	keys, vals, err := objectFields(raw)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	put := func(k string, v json.RawMessage) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	for _, f := range extra {
		vb, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		put(f.key, vb)
	}
	for _, k := range first {
		if i := slices.Index(keys, k); i >= 0 {
			put(k, vals[i])
		}
	}
	for i, k := range keys {
		if !slices.Contains(first, k) {
			put(k, vals[i])
		}
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// objectFields splits a JSON object into its keys and raw values, in order.
func objectFields(raw []byte) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("not a JSON object: %s", raw)
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, ok := t.(string)
		if !ok {
			return nil, nil, fmt.Errorf("not a JSON object key: %v", t)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, nil
}
