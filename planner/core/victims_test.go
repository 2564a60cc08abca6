package core

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseVictimOrder(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want VictimOrder
		err  bool
	}{
		{"policy", VictimsByPolicy, false},
		{" least-lost-work ", LeastLostWork, false},
		{"least-lost", 0, true},
		{"", 0, true},
	} {
		got, err := ParseVictimOrder(tc.in)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("ParseVictimOrder(%q) = %v, %v", tc.in, got, err)
		}
		if err != nil && (!strings.Contains(err.Error(), KnobVictims) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in))) {
			t.Errorf("error %q does not name the knob and the value", err)
		}
	}
	k, _ := ParseKnobs(nil)
	if o, tie, err := VictimsFromKnobs(k); err != nil || o != VictimsByPolicy || tie != 0 {
		t.Errorf("default: %v, %v, %v; want policy, 0", o, tie, err)
	}
	for _, c := range []struct {
		sets []string
		err  string
	}{
		{[]string{"preempt.victims=least-lost-work", "preempt.tie=0.1"}, ""},
		{[]string{"preempt.tie=0.1"}, `preempt.tie = "0.1": ties are broken by lost work only under preempt.victims=least-lost-work`},
		{[]string{"preempt.victims=least-lost-work", "preempt.tie=1"}, `preempt.tie = "1": want a fraction`},
		{[]string{"preempt.victims=least-lost-work", "preempt.tie=-0.5"}, `preempt.tie = "-0.5"`},
		{[]string{"preempt.victims=least-lost-work", "preempt.tie=x"}, `preempt.tie = "x"`},
	} {
		k, _ := ParseKnobs(c.sets)
		_, tie, err := VictimsFromKnobs(k)
		if c.err == "" && (err != nil || tie != 0.1) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%v: tie %v, error %v; want error %q", c.sets, tie, err, c.err)
		}
	}
}

// FuzzParseVictimOrder: a value parses only to a known order, whose name
// parses back to it; anything else is an error naming the knob.
func FuzzParseVictimOrder(f *testing.F) {
	for _, s := range []string{"policy", "least-lost-work", "", "LEAST", "least-lost-work\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseVictimOrder(s)
		if err != nil {
			if !strings.Contains(err.Error(), KnobVictims) {
				t.Fatalf("error %q does not name %s", err, KnobVictims)
			}
			return
		}
		if back, err := ParseVictimOrder(o.String()); err != nil || back != o {
			t.Fatalf("%q parsed to %v, whose name parses to %v, %v", s, o, back, err)
		}
	})
}
