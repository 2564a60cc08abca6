package hived

import (
	"strings"
	"testing"
	"time"
)

// max_grace_period parses, bounds its VC's jobs, names where it is, and
// survives FormatConfig; a value that is not a positive duration is an
// error naming it.
func TestMaxGracePeriod(t *testing.T) {
	cfg, err := ParseConfig("g.hcl", []byte("vc \"a\" {\n  namespace \"*\" {}\n  max_grace_period = \"2m\"\n}\nvc \"b\" {\n  namespace \"*\" {}\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d, pos := cfg.GraceBound("a"); d != 2*time.Minute || pos != "g.hcl:3,22" {
		t.Errorf("a: bound %s at %q", d, pos)
	}
	if d, _ := cfg.GraceBound("b"); d != 0 {
		t.Errorf("b: bound %s, want none", d)
	}
	if err := cfg.AdmitGrace("a", 2*time.Minute); err != nil {
		t.Errorf("at the bound: %v", err)
	}
	if err := cfg.AdmitGrace("a", 30*time.Minute); err == nil || !strings.Contains(err.Error(), `themis.grace_period: 30m0s is longer than virtual cluster "a"`) || !strings.Contains(err.Error(), "g.hcl:3,22") {
		t.Errorf("above the bound: %v", err)
	}
	if err := cfg.AdmitGrace("b", 30*time.Minute); err != nil {
		t.Errorf("no bound: %v", err)
	}
	back, err := ParseConfig("back.hcl", FormatConfig(cfg))
	if err != nil || back.VCs[0].MaxGracePeriod != 2*time.Minute {
		t.Errorf("read back: %v, %+v\n%s", err, back, FormatConfig(cfg))
	}
	for _, bad := range []string{`"soon"`, `"-1m"`, `"0s"`} {
		if _, err := ParseConfig("x.hcl", []byte("vc \"a\" {\n  max_grace_period = "+bad+"\n}\n")); err == nil || !strings.Contains(err.Error(), "max_grace_period") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
