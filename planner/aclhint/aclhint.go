// Package aclhint turns Nomad's and Consul's bare ACL refusals (HTTP 403
// "Permission denied") into errors that say which call was refused and which
// capability, in which of the policies of examples/acl, it needs
// (docs/acl.md).
package aclhint

import (
	"errors"
	"fmt"
	"strings"
)

// Docs is where the policies are explained.
const Docs = "docs/acl.md"

// Error is an ACL refusal with its hint; Unwrap gives the API's error.
type Error struct {
	// System is "Nomad" or "Consul"; Call what was refused; Need the
	// capability; Policy the file of examples/acl that grants it.
	System, Call, Need, Policy string
	Err                        error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s refused %s: permission denied (the %s token needs %s, as in examples/acl/%s; see %s): %v",
		e.System, e.Call, e.System, e.Need, e.Policy, Docs, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Denied reports whether err is an ACL refusal: Nomad's and Consul's HTTP
// 403 "Permission denied", a transaction operation rolled back with it, or
// a token the agent does not know.
func Denied(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "permission denied") || strings.Contains(s, "acl not found") ||
		strings.Contains(s, "token not found")
}

// Wrap returns err with its hint when it is an ACL refusal, else err as it
// is (nil stays nil).
func Wrap(err error, system, call, need, policy string) error {
	if !Denied(err) {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{System: system, Call: call, Need: need, Policy: policy, Err: err}
}

// KeyPrefix is the KV prefix a policy grants for key: its first two
// segments ("themis/leases/"), or the key itself when it has fewer.
func KeyPrefix(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) < 3 {
		return key
	}
	return parts[0] + "/" + parts[1] + "/"
}
