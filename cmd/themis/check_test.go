package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/check"
)

// themis check -once tells a violation (1) from a cluster it cannot read (2).
func TestCheckOnceUnreachable(t *testing.T) {
	if code := run([]string{"check", "-once", "-consul-addr", "127.0.0.1:1", "-nomad-addr", "http://127.0.0.1:1"}); code != 2 {
		t.Fatalf("themis check -once against nothing: exit %d, want 2", code)
	}
}

func TestCheckPrinter(t *testing.T) {
	v := check.Violation{Kind: check.DoubleLease, Job: "default/b", GPU: "g1",
		Since: time.Date(2026, 11, 24, 10, 0, 5, 0, time.UTC), Message: "GPU g1 is leased to 2 jobs"}
	var b bytes.Buffer
	printer(&b, true)(v)
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["kind"] != "double-lease" || got["job"] != "default/b" || got["gpu"] != "g1" || got["since"] != "2026-11-24T10:00:05Z" {
		t.Fatalf("-json printed %s", b.String())
	}
	b.Reset()
	printer(&b, false)(v)
	if !strings.Contains(b.String(), "VIOLATION double-lease job=default/b gpu=g1 since=2026-11-24T10:00:05Z: GPU g1 is leased to 2 jobs") {
		t.Fatalf("printed %q", b.String())
	}
}
