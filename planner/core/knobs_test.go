package core

import (
	"strings"
	"testing"
)

// TestKnobsWith: derived knobs add settings and share the record of use.
func TestKnobsWith(t *testing.T) {
	k, err := ParseKnobs([]string{"tiresias.queues=100", "fitgpp.s=2"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := k.With("fitgpp.s=8", "fitgpp.max_preemptions=3")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := d.Float("fitgpp.s", 0); s != 8 {
		t.Errorf("derived fitgpp.s = %g, want 8", s)
	}
	if s, _ := k.Float("fitgpp.s", 0); s != 2 {
		t.Errorf("base fitgpp.s = %g, want 2 (unchanged)", s)
	}
	if err := k.Unused(); err == nil || !strings.Contains(err.Error(), "tiresias.queues") {
		t.Errorf("base: %v, want tiresias.queues unused", err)
	}
	d.Has("tiresias.queues")
	if err := k.Unused(); err != nil {
		t.Errorf("base after the derived knobs used tiresias.queues: %v", err)
	}
	if err := d.Unused(); err == nil || !strings.Contains(err.Error(), "fitgpp.max_preemptions") {
		t.Errorf("derived: %v, want fitgpp.max_preemptions unused", err)
	}
	if _, err := k.With("novalue"); err == nil {
		t.Error("With(novalue): no error")
	}
}
