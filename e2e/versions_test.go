package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlannerReadsTheServersVersions: `themis planner` reads the Nomad and
// Consul servers' versions at start (cmd/themis/versions.go) from the real
// agents, finds the suite's own pins tested, and warns of nothing.
func TestPlannerReadsTheServersVersions(t *testing.T) {
	cmd := startPlannerProcess(t, "e2e-versions", "-http-addr", "127.0.0.1:0")
	logPath := cmd.Stdout.(*os.File).Name()
	var text string
	eventually(t, 30*time.Second, "the planner logs both products' versions", func() (bool, error) {
		b, err := os.ReadFile(logPath)
		text = string(b)
		return strings.Count(text, "servers' versions") >= 2, err
	})
	for _, want := range []string{"product=Nomad", "=1.11.3", "product=Consul", "=1.22.0"} {
		if !strings.Contains(text, want) {
			t.Errorf("planner log (%s) lacks %q:\n%s", filepath.Base(logPath), want, text)
		}
	}
	if strings.Contains(text, "untested version") {
		t.Errorf("the suite's own agents are called untested:\n%s", text)
	}
}
