package e2e

import (
	"encoding/json"
	"fmt"
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
	// status counts the status records written, by state and reason.
	status map[string]int
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
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/kv/themis/status/") && r.GetBody != nil {
		if b, err := r.GetBody(); err == nil {
			var st struct{ State, Reason string }
			if json.NewDecoder(b).Decode(&st) == nil {
				reason := regexp.MustCompile(`[0-9]+`).ReplaceAllString(st.Reason, "N")
				c.mu.Lock()
				c.status[st.State+": "+reason[:min(len(reason), 70)]]++
				c.mu.Unlock()
			}
		}
	}
	start := time.Now()
	resp, err := c.next.RoundTrip(r)
	took := time.Since(start)
	k := callKey(r)
	c.mu.Lock()
	c.took[k] = append(c.took[k], took)
	c.mu.Unlock()
	return resp, err
}

// window logs the calls since the last window, the costliest (by total
// time) first, and starts a new window.
func (c *callTimer) window(t *testing.T, label string) {
	c.mu.Lock()
	took := c.took
	c.took = map[string][]time.Duration{}
	status := c.status
	c.status = map[string]int{}
	c.mu.Unlock()
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
