package consul

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// limitedConsul is Consul's /v1/txn with its limits (agent/txn_endpoint.go):
// a request body over txn_max_req_len (512 KiB) is refused whole with 413;
// a value over kv_max_value_size (512 KiB) rolls the transaction back
// (409) naming the operation. What it commits, it keeps.
type limitedConsul struct {
	mu   sync.Mutex
	kv   map[string][]byte
	txns int
}

func (c *limitedConsul) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txns++
	if len(body) > 512<<10 {
		http.Error(w, "Request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	var ops api.TxnOps
	if err := json.Unmarshal(body, &ops); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for i, op := range ops {
		if len(op.KV.Value) > 512<<10 {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(api.TxnResponse{Errors: api.TxnErrors{{OpIndex: i, What: "value too large"}}})
			return
		}
	}
	for _, op := range ops {
		switch op.KV.Verb {
		case api.KVSet:
			c.kv[op.KV.Key] = op.KV.Value
		case api.KVDelete:
			delete(c.kv, op.KV.Key)
		}
	}
	_ = json.NewEncoder(w).Encode(api.TxnResponse{})
}

// One status record Consul cannot take (a job ID of 400 KB, as Nomad
// allows: its key alone is over the request limit; a value over the value
// limit) does not stop the others: every other record is written, and the
// error names the one refused.
func TestOneUnwritableStatusStopsNoOther(t *testing.T) {
	fake := &limitedConsul{kv: map[string][]byte{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(c)
	huge := strings.Repeat("x", 400<<10)
	st := func(id, reason string) lease.JobStatus {
		return lease.JobStatus{Namespace: "default", JobID: id, State: "queued", Reason: reason}
	}
	puts := []lease.JobStatus{st("a", ""), st(huge, "rejected"), st("b", ""), st("c", strings.Repeat("r", 600<<10)), st("d", "")}
	n, err := s.WriteStatuses(context.Background(), puts, nil)
	for _, id := range []string{"a", "b", "d"} {
		if _, ok := fake.kv[lease.StatusKey(core.JobKey{Namespace: "default", ID: id})]; !ok {
			t.Errorf("status of %q not written (%d committed, err %v)", id, n, err)
		}
	}
	var re *RefusedError
	if err == nil || !errors.As(err, &re) || len(re.Writes) != 2 || re.Writes[0].Index != 1 || re.Writes[1].Index != 3 {
		t.Fatalf("err = %v, want a RefusedError naming writes 1 and 3", err)
	}
	if msg := err.Error(); len(msg) > 4096 || !strings.Contains(msg, "default/xxxx") {
		t.Errorf("the error is %d bytes (want it bounded) and names %q", len(msg), msg[:min(len(msg), 200)])
	}
}
