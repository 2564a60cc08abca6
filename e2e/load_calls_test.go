package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/themis-nomad/themis/planner/lease"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// callTimer is an http.RoundTripper that times each request the planner's
// Nomad and Consul clients make, by method and path (job ids, node and
// allocation ids collapsed to *), so a load run can log which call grows
// (THEMIS_LOAD_CALLS=1, load_test.go).
type callTimer struct {
	name string
	next http.RoundTripper
	mu   sync.Mutex
	took map[string][]time.Duration
	// status counts the status records written, by state and reason;
	// statusReqs the requests that wrote or deleted status records
	// (PUT and DELETE /v1/kv/themis/status/..., or a PUT /v1/txn with
	// status keys) and statusOps the records they wrote or deleted.
	status                map[string]int
	statusReqs, statusOps int
	// allReqs, allOps and allRounds are the windows' so far.
	allReqs, allOps, allRounds int
}

func newCallTimer(name string) *callTimer {
	return &callTimer{name: name, next: http.DefaultTransport, took: map[string][]time.Duration{}, status: map[string]int{}}
}

var idSegment = regexp.MustCompile(`^(load-\d+|[0-9a-f]{8}-[0-9a-f-]{27}|node-\d+)$`)

func callKey(r *http.Request) string {
	parts := strings.Split(r.URL.Path, "/")
	for i, p := range parts {
		if idSegment.MatchString(p) {
			parts[i] = "*"
		}
	}
	path := strings.Join(parts, "/")
	// Consul KV paths: keep the first two levels under themis/.
	if strings.HasPrefix(path, "/v1/kv/") {
		kv := strings.SplitN(strings.TrimPrefix(path, "/v1/kv/"), "/", 3)
		path = "/v1/kv/" + strings.Join(kv[:min(2, len(kv))], "/")
		if r.URL.Query().Has("recurse") {
			path += "?recurse"
		}
	}
	return r.Method + " " + path
}

func (c *callTimer) RoundTrip(r *http.Request) (*http.Response, error) {
	ops := c.statusWrites(r)
	start := time.Now()
	resp, err := c.next.RoundTrip(r)
	took := time.Since(start)
	k := callKey(r)
	if ops > 0 && r.URL.Path == "/v1/txn" {
		k += " (status)"
	}
	c.mu.Lock()
	c.took[k] = append(c.took[k], took)
	if ops > 0 {
		c.statusReqs++
		c.statusOps += ops
	}
	c.mu.Unlock()
	return resp, err
}

// kvWrite is a status record write as it goes to Consul: the body of a PUT
// /v1/kv/themis/status/ key (a put; a DELETE has none) or one operation of a
// transaction (PUT /v1/txn).
type kvWrite struct {
	Verb, Key string
	Value     []byte
}

// statusWrites counts, by state and reason, the status records r writes
// (one a request per key, or many in a transaction), and returns how many
// records r writes or deletes (0: r is no status write).
func (c *callTimer) statusWrites(r *http.Request) int {
	var writes []kvWrite
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/kv/"+lease.StatusPrefix) && r.Method == http.MethodDelete:
		return 1
	case strings.HasPrefix(r.URL.Path, "/v1/kv/"+lease.StatusPrefix) && r.Method == http.MethodPut && r.GetBody != nil:
		b, err := r.GetBody()
		if err != nil {
			return 1
		}
		v, _ := io.ReadAll(b)
		writes = []kvWrite{{Verb: "set", Key: strings.TrimPrefix(r.URL.Path, "/v1/kv/"), Value: v}}
	case r.URL.Path == "/v1/txn" && r.Method == http.MethodPut && r.GetBody != nil:
		b, err := r.GetBody()
		if err != nil {
			return 0
		}
		var ops []struct{ KV *kvWrite }
		if json.NewDecoder(b).Decode(&ops) != nil {
			return 0
		}
		for _, op := range ops {
			if op.KV != nil && strings.HasPrefix(op.KV.Key, lease.StatusPrefix) {
				writes = append(writes, *op.KV)
			}
		}
	default:
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range writes {
		var st struct{ State, Reason string }
		if w.Verb != "set" || json.Unmarshal(w.Value, &st) != nil {
			continue
		}
		reason := digits.ReplaceAllString(st.Reason, "N")
		c.status[st.State+": "+reason[:min(len(reason), 70)]]++
	}
	return len(writes)
}

var digits = regexp.MustCompile(`[0-9]+`)

// window logs the calls since the last window, the costliest (by total
// time) first, and the status writes per round of the window's rounds, and
// starts a new window.
func (c *callTimer) window(t *testing.T, label string, rounds int) {
	c.mu.Lock()
	took := c.took
	c.took = map[string][]time.Duration{}
	status := c.status
	c.status = map[string]int{}
	reqs, ops := c.statusReqs, c.statusOps
	c.statusReqs, c.statusOps = 0, 0
	c.allReqs, c.allOps, c.allRounds = c.allReqs+reqs, c.allOps+ops, c.allRounds+rounds
	c.mu.Unlock()
	if reqs > 0 {
		t.Logf("%s %s status writes: %d requests (%.2f a round), %d records written or deleted (%.2f a round)",
			label, c.name, reqs, float64(reqs)/float64(max(rounds, 1)), ops, float64(ops)/float64(max(rounds, 1)))
	}
	type row struct {
		key   string
		n     int
		total time.Duration
	}
	var rows []row
	var all time.Duration
	for k, ds := range took {
		var s time.Duration
		for _, d := range ds {
			s += d
		}
		all += s
		rows = append(rows, row{k, len(ds), s})
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.total - a.total) })
	t.Logf("%s %s calls: total %s", label, c.name, all.Round(time.Millisecond))
	for _, r := range rows[:min(6, len(rows))] {
		ds := took[r.key]
		slices.Sort(ds)
		t.Logf("  %-45s n=%5d total %7s p50 %6s p99 %6s", r.key, r.n, r.total.Round(time.Millisecond),
			quantile(ds, 0.5).Round(100*time.Microsecond), quantile(ds, 0.99).Round(100*time.Microsecond))
	}
	for k, n := range status {
		if n >= 20 {
			t.Logf("  status written %5d times: %s", n, k)
		}
	}
}

// total logs the status writes of every window so far, per round.
func (c *callTimer) total(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("whole run %s status writes: %d requests in %d rounds (%.2f a round), %d records written or deleted (%.2f a round)",
		c.name, c.allReqs, c.allRounds, float64(c.allReqs)/float64(max(c.allRounds, 1)), c.allOps, float64(c.allOps)/float64(max(c.allRounds, 1)))
}

// agentCPU sums the CPU time (user+system) of the processes whose command
// line names dir (the run's Nomad server, clients and Consul), by the base
// name of their -config file (or of the binary), and this process's.
func agentCPU(dir string) map[string]time.Duration {
	const hz = 100 // USER_HZ
	out := map[string]time.Duration{}
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		name := ""
		switch {
		case pid == self:
			name = "test process (planner)"
		case strings.Contains(string(cmd), dir):
			name = filepath.Base(args[0])
			for i, a := range args {
				if strings.HasPrefix(a, "-config") && i+1 < len(args) {
					name += " " + filepath.Base(args[i+1])
				}
			}
		default:
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		out[name] += time.Duration(u+s) * time.Second / hz
	}
	// The whole host's busy time (all processes, both cores).
	if st, err := os.ReadFile("/proc/stat"); err == nil {
		f := strings.Fields(strings.SplitN(string(st), "\n", 2)[0])
		busy := 0
		for i, v := range f[1:] {
			n, _ := strconv.Atoi(v)
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		out["host busy"] = time.Duration(busy) * time.Second / hz
	}
	return out
}

func logCPU(t *testing.T, label string, prev, cur map[string]time.Duration) {
	keys := make([]string, 0, len(cur))
	for k := range cur {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, (cur[k] - prev[k]).Round(10*time.Millisecond))
	}
	t.Logf("%s CPU in the window:%s", label, b.String())
}
