package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// countingTransport counts a client's requests by method and path.
type countingTransport struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// statusesIn reads every status record in Consul, by job.
func statusesIn(t *testing.T, s *consul.Store) map[string]lease.JobStatus {
	t.Helper()
	sts, err := s.Statuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]lease.JobStatus{}
	for _, st := range sts {
		out[st.Namespace+"/"+st.JobID] = st
	}
	return out
}

// A round's status records go to Consul in transactions of at most
// consul.MaxTxnOps operations (Consul refuses longer ones whole), puts and
// deletes together; a transaction that fails stops the write, and the
// count returned is what Consul committed before it.
func TestStatusTransactions(t *testing.T) {
	addr := privateConsulAddr(t)
	ct := &countingTransport{n: map[string]int{}}
	cfg := consulapi.DefaultConfig()
	cfg.Address = addr
	cfg.HttpClient = &http.Client{Transport: ct}
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := consul.NewStore(c)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	status := func(i int, state string) lease.JobStatus {
		// Namespaces and IDs that need escaping in a key.
		return lease.JobStatus{Namespace: fmt.Sprintf("ns %d", i%3), JobID: fmt.Sprintf("job/%03d", i), State: state,
			Reason: fmt.Sprintf(`behind default/job-%03d in virtual cluster "vision"'s fitgpp queue`, i), Since: now}
	}
	key := func(i int) core.JobKey {
		return core.JobKey{Namespace: fmt.Sprintf("ns %d", i%3), ID: fmt.Sprintf("job/%03d", i)}
	}
	name := func(i int) string { k := key(i); return k.Namespace + "/" + k.ID }

	// 300 records: three transactions (127 + 127 + 46: one op of each is kept for the leader's fence).
	const n = 300
	var puts []lease.JobStatus
	for i := range n {
		puts = append(puts, status(i, "queued"))
	}
	if done, err := s.WriteStatuses(ctx, puts, nil); err != nil || done != n {
		t.Fatalf("write %d: done %d, err %v", n, done, err)
	}
	if got := ct.take(); got["PUT /v1/txn"] != 3 || len(got) != 1 {
		t.Errorf("requests for %d records: %v, want 3 PUT /v1/txn and nothing else", n, got)
	}
	got := statusesIn(t, s)
	if len(got) != n {
		t.Fatalf("%d records in Consul, want %d", len(got), n)
	}
	for i := range n {
		if st := got[name(i)]; st.State != "queued" || st.Reason != puts[i].Reason || !st.Since.Equal(now) {
			t.Fatalf("%s: %+v, want %+v", name(i), st, puts[i])
		}
	}
	keys, _, err := c.KV().Keys(lease.StatusPrefix, "", nil)
	if err != nil || len(keys) != n || !strings.Contains(strings.Join(keys, " "), lease.StatusKey(key(7))) {
		t.Fatalf("keys under %s: %d (err %v), want %d with %s", lease.StatusPrefix, len(keys), err, n, lease.StatusKey(key(7)))
	}

	// 100 changed and 150 deleted, in one go: two transactions.
	var changed []lease.JobStatus
	var dels []core.JobKey
	for i := range 100 {
		changed = append(changed, status(i, "granted"))
	}
	for i := 150; i < n; i++ {
		dels = append(dels, key(i))
	}
	ct.take() // the reads above
	if done, err := s.WriteStatuses(ctx, changed, dels); err != nil || done != 250 {
		t.Fatalf("write 100, delete 150: done %d, err %v", done, err)
	}
	if got := ct.take(); got["PUT /v1/txn"] != 2 || len(got) != 1 {
		t.Errorf("requests for 250 writes: %v, want 2 PUT /v1/txn", got)
	}
	got = statusesIn(t, s)
	if len(got) != 150 {
		t.Fatalf("%d records after deleting 150 of %d, want 150", len(got), n)
	}
	for i := range 150 {
		want := "queued"
		if i < 100 {
			want = "granted"
		}
		if st, ok := got[name(i)]; !ok || st.State != want {
			t.Fatalf("%s: %+v (found %v), want %s", name(i), st, ok, want)
		}
	}

	// One record that cannot be written (a value over the planner's limit
	// for one write, which Consul's 512 KiB request limit would refuse
	// with its whole transaction) never stops the others: it alone is
	// left out and named in a RefusedError; every other write and the
	// delete are carried out and counted (planner/consul/status.go).
	var mixed []lease.JobStatus
	for i := range 140 {
		mixed = append(mixed, status(i, "suspended"))
	}
	mixed[135].Reason = strings.Repeat("x", 600<<10)
	done, err := s.WriteStatuses(ctx, mixed, []core.JobKey{key(149)})
	var refused *consul.RefusedError
	if !errors.As(err, &refused) || len(refused.Writes) != 1 || refused.Err != nil || done != 141 {
		t.Fatalf("a write with one record too large: done %d, err %v; want 141 dealt with and one write refused alone", done, err)
	}
	if !strings.Contains(err.Error(), "job%2F135") {
		t.Errorf("the refusal does not name job/135: %v", err)
	}
	got = statusesIn(t, s)
	for i := range 149 {
		st := got[name(i)]
		if want := i < 140 && i != 135; (st.State == "suspended") != want {
			t.Fatalf("%s: %+v, want suspended %v (every write but the refused one)", name(i), st, want)
		}
	}
	if _, ok := got[name(149)]; ok {
		t.Error("the delete after the refused write was not carried out")
	}
	t.Logf("refused: %v", err)
}
