package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPlannerReadsTheServersVersions: `themis planner` reads the Nomad and
// Consul servers' versions at start (cmd/themis/versions.go) from the real
// agents, and warns of Nomad exactly when the suite runs a Nomad other than
// the tested pin (1.11.3; `make test-nomad2` runs 2.0.5).
func TestPlannerReadsTheServersVersions(t *testing.T) {
	out, err := exec.Command(env.nomadBin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Nomad v([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("nomad version said %q", out)
	}
	nomadVersion := string(m[1])
	cmd := startPlannerProcess(t, "e2e-versions", "-http-addr", "127.0.0.1:0")
	logPath := cmd.Stdout.(*os.File).Name()
	var text string
	eventually(t, 30*time.Second, "the planner logs both products' versions", func() (bool, error) {
		b, err := os.ReadFile(logPath)
		text = string(b)
		return strings.Count(text, "servers' versions") >= 2, err
	})
	for _, want := range []string{"product=Nomad", "=" + nomadVersion, "product=Consul", "=1.22.0"} {
		if !strings.Contains(text, want) {
			t.Errorf("planner log lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "untested version: Consul") {
		t.Errorf("the suite's Consul is called untested:\n%s", text)
	}
	warned := strings.Contains(text, "untested version: Nomad server")
	if want := nomadVersion != "1.11.3"; warned != want {
		t.Errorf("Nomad v%s: warned of an untested version %v, want %v:\n%s", nomadVersion, warned, want, text)
	}
}
