package aclhint

import (
	"errors"
	"strings"
	"testing"
)

func TestWrap(t *testing.T) {
	plain := errors.New("connection refused")
	if Wrap(plain, "Nomad", "list nodes", "node read", "planner.nomad.hcl") != plain {
		t.Fatal("a non-ACL error must pass unchanged")
	}
	if Wrap(nil, "Nomad", "x", "y", "z") != nil {
		t.Fatal("nil must stay nil")
	}
	denied := errors.New("Unexpected response code: 403 (Permission denied)")
	err := Wrap(denied, "Nomad", "list nodes (GET /v1/nodes)", "node { policy = \"read\" }", "planner.nomad.hcl")
	if !errors.Is(err, denied) || !Denied(err) {
		t.Fatalf("wrapped error lost its cause: %v", err)
	}
	for _, want := range []string{"Nomad refused list nodes", "node { policy = \"read\" }", "examples/acl/planner.nomad.hcl", Docs} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if again := Wrap(err, "Nomad", "other", "other", "other"); again != err {
		t.Errorf("wrapping twice changed the hint: %v", again)
	}
	if got := KeyPrefix("themis/leases/gpus/x"); got != "themis/leases/" {
		t.Errorf("KeyPrefix = %q", got)
	}
	if got := KeyPrefix("themis/planner"); got != "themis/planner" {
		t.Errorf("KeyPrefix = %q", got)
	}
}
