package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/e2e/browser"
	"github.com/themis-nomad/themis/planner/lease"
)

// What an operator sees in a browser, on the real agents: a running job's
// lease key in Consul's UI (Key/Value > themis > leases > jobs > default)
// shows the lease as indented JSON, one field a line, opening with its
// state, job, VC and GPUs, granted at; and the planner's dashboard draws
// the job on its GPUs. THEMIS_SCREENSHOTS=DIR keeps the lease's page as
// a PNG (docs/img holds the one the docs show).
func TestBrowserShowsTheLease(t *testing.T) {
	b := browser.Find(t)
	ctx, cancel := context.WithTimeout(env.ctx, 3*time.Minute)
	defer cancel()
	id := "e2e-browser"
	trainJob{gpus: 4, shell: "sleep 600"}.run(t, id)
	waitRunning(t, id, 60*time.Second)
	l := jobLease(t, id)

	url := fmt.Sprintf("http://%s/ui/dc1/kv/%s/edit", env.stack.ConsulAddr(), lease.JobKey(l.Namespace, l.JobID))
	var lines []string
	eventually(t, 60*time.Second, "the lease in Consul's UI", func() (bool, error) {
		dom, err := b.DOM(ctx, url, 10*time.Second)
		if err != nil {
			return false, err
		}
		lines = browser.EditorLines(dom)
		return len(lines) > 8, fmt.Errorf("the editor shows %d lines: %q", len(lines), lines)
	})
	want := []string{
		`{`,
		`  "state": "granted",`,
		`  "job": "default/` + id + `",`,
		`  "vc": "default",`,
		`  "gpus": [`,
		`    "` + l.GPUs[0] + `",`,
	}
	if !slices.Equal(lines[:len(want)], want) {
		t.Errorf("Consul's UI shows the lease as\n%s\nwant it to open with\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, field := range []string{`  "node_name": "dev-node",`, `  "granted_at": "` + l.GrantedAt.UTC().Format(time.RFC3339Nano) + `",`, `  "lease_id": "` + l.LeaseID + `",`} {
		if !slices.Contains(lines, field) {
			t.Errorf("Consul's UI lacks the line %s:\n%s", field, strings.Join(lines, "\n"))
		}
	}

	dash := env.apiURL + "/ui/#once"
	dom, err := b.DOM(ctx, dash, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, gpu := range l.GPUs {
		if want := fmt.Sprintf(`data-gpu="%s" data-state="leased" data-job="default/%s"`, gpu, id); !strings.Contains(dom, want) {
			t.Errorf("the dashboard lacks %s", want)
		}
	}

	if dir := os.Getenv("THEMIS_SCREENSHOTS"); dir != "" {
		if err := b.Screenshot(ctx, url, 10*time.Second, filepath.Join(dir, "consul-ui-lease.png"), 1280, 1000); err != nil {
			t.Error(err)
		}
	}
}
