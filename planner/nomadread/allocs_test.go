package nomadread

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// What Allocs.Read makes of Nomad's answers between its list and its reads
// (the real server's cases are TestAllocReadSeesEveryChange in
// e2e/nodesim): an allocation gone since the list is dropped; one read as
// another ID, or that Nomad fails to read, fails the Read and leaves the
// last one's stubs; more changed than MaxReads are listed in full.
func TestAllocsReadAnswers(t *testing.T) {
	type row struct {
		id     string
		modify uint64
		status int // of its own read; 0: 200
		as     string
	}
	var mu sync.Mutex
	var rows []row
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		q := r.URL.Query()
		asked = append(asked, r.URL.Path+"?"+q.Get("task_states"))
		w.Header().Set("X-Nomad-Index", "9")
		if r.URL.Path == "/v1/allocations" {
			var out []api.AllocationListStub
			for _, x := range rows {
				s := api.AllocationListStub{ID: x.id, Namespace: "default", ModifyIndex: x.modify, ClientStatus: "running"}
				if q.Get("task_states") != "false" {
					s.TaskStates = map[string]*api.TaskState{"t": {State: "running"}}
				}
				out = append(out, s)
			}
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		id := strings.TrimPrefix(r.URL.Path, "/v1/allocation/")
		for _, x := range rows {
			if x.id != id {
				continue
			}
			if x.status != 0 {
				http.Error(w, "no", x.status)
				return
			}
			_ = json.NewEncoder(w).Encode(api.Allocation{ID: cmp.Or(x.as, x.id), Namespace: "default", ModifyIndex: x.modify,
				ClientStatus: "running", TaskStates: map[string]*api.TaskState{"t": {State: "running"}}})
			return
		}
		http.Error(w, "alloc not found", http.StatusNotFound)
	}))
	defer srv.Close()
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	set := func(rs ...row) {
		mu.Lock()
		defer mu.Unlock()
		rows, asked = rs, nil
	}
	ids := func(m map[string]*api.AllocationListStub) []string {
		var out []string
		for id, s := range m {
			if s.TaskStates["t"] == nil {
				t.Errorf("%s has no task states", id)
			}
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	ctx := context.Background()
	a := &Allocs{MaxReads: 2}
	read := func(want ...string) {
		t.Helper()
		got, _, err := a.Read(ctx, c, false)
		if err != nil {
			t.Fatal(err)
		}
		if g := ids(got); !slices.Equal(g, want) {
			t.Fatalf("read %v, want %v (asked %v)", g, want, asked)
		}
	}

	set(row{id: "a", modify: 1}, row{id: "b", modify: 1})
	read("a", "b")
	if a.InFull != 2 {
		t.Errorf("the first read listed %d in full, want both", a.InFull)
	}
	// c comes, b changes but is gone before it is read, a stays.
	set(row{id: "a", modify: 1}, row{id: "b", modify: 2, status: http.StatusNotFound}, row{id: "c", modify: 3})
	read("a", "c")
	if want := []string{"/v1/allocations?false", "/v1/allocation/b?", "/v1/allocation/c?"}; !sameSet(asked, want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	// Another ID answers: the Read fails, and the next one reads again.
	set(row{id: "a", modify: 4, as: "z"}, row{id: "c", modify: 3})
	if _, _, err := a.Read(ctx, c, false); err == nil || !strings.Contains(err.Error(), `answered with allocation "z"`) {
		t.Errorf("another ID read: %v", err)
	}
	set(row{id: "a", modify: 4, status: http.StatusInternalServerError}, row{id: "c", modify: 3})
	if _, _, err := a.Read(ctx, c, false); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("a read Nomad fails: %v", err)
	}
	set(row{id: "a", modify: 4}, row{id: "c", modify: 3})
	read("a", "c")
	// Three changed, more than MaxReads: one list in full.
	set(row{id: "a", modify: 5}, row{id: "c", modify: 5}, row{id: "d", modify: 5})
	full := a.InFull
	read("a", "c", "d")
	if a.InFull != full+3 || slices.ContainsFunc(asked, func(s string) bool { return strings.HasPrefix(s, "/v1/allocation/") }) {
		t.Errorf("three changed: asked %v, listed %d in full", asked, a.InFull-full)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
