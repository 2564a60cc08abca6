package main

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

func TestUntestedServers(t *testing.T) {
	tested := []string{"1.11.3"}
	for _, tc := range []struct {
		name    string
		servers []serverVersion
		want    []string
	}{
		{"all tested", []serverVersion{{"s1", "1.11.3"}, {"s2", "1.11.3"}}, nil},
		{"build suffixes", []serverVersion{{"s1", "1.11.3+ent"}, {"s2", "v1.11.3:abcdef"}}, nil},
		{"one newer", []serverVersion{{"s2", "2.0.5"}, {"s1", "1.11.3"}},
			[]string{"Nomad server s2 runs 2.0.5 (tested: 1.11.3)"}},
		{"pre-release is not the release", []serverVersion{{"s1", "1.11.3-dev"}},
			[]string{"Nomad server s1 runs 1.11.3-dev (tested: 1.11.3)"}},
		{"mid-upgrade, sorted", []serverVersion{{"b", "1.11.4"}, {"a", "1.11.2"}},
			[]string{"Nomad server a runs 1.11.2 (tested: 1.11.3)", "Nomad server b runs 1.11.4 (tested: 1.11.3)"}},
		{"no build tag", []serverVersion{{"s1", ""}},
			[]string{"Nomad server s1 runs an unknown version (tested: 1.11.3)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := untestedServers("Nomad", tested, tc.servers)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d: got %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestTestedVersionsMatchTheBuildPins: the versions the planner calls tested
// are the ones e2e/agents/build.sh builds for the suite.
func TestTestedVersionsMatchTheBuildPins(t *testing.T) {
	b, err := os.ReadFile("../../e2e/agents/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, pin := range []struct {
		name   string
		tested []string
	}{{"NOMAD_VERSION", testedNomad}, {"CONSUL_VERSION", testedConsul}} {
		m := regexp.MustCompile(pin.name + `="\$\{` + pin.name + `:-([0-9.]+)\}"`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("no default %s in build.sh", pin.name)
		}
		if !slices.Contains(pin.tested, string(m[1])) {
			t.Errorf("build.sh pins %s=%s, but the planner calls tested only %v", pin.name, m[1], pin.tested)
		}
	}
}
