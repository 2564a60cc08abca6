// Package nomadread reads one Nomad job's full definition by its ID, for
// the planner (planner/nomad) and the invariant watcher (planner/check),
// whatever the ID holds.
//
// Nomad serves GET /v1/job/<id> by the path's suffix, so a job named
// "x/allocations" answers with its allocations, and "." or ".." is
// redirected away. Job therefore escapes every character of the ID that is
// not unreserved, dots included (Path), and reads an ID with a "/" from
// GET /v1/job/<id>/versions, whose suffix no ID can reroute; whatever comes
// back must name the job asked for. Every case: docs/adversary.md, "Job IDs
// Nomad routes elsewhere".
package nomadread

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// ErrGone means Nomad has no such job (it was purged since it was listed).
var ErrGone = errors.New("job not in Nomad")

// Unreadable is a job Nomad lists whose definition cannot be read or does
// not decode. Only this job is affected: the caller sets it aside (and
// reads it again next time) and goes on with the others.
type Unreadable struct {
	Namespace, ID string
	Err           error
}

func (u *Unreadable) Error() string {
	return fmt.Sprintf("Nomad job %q in namespace %q cannot be read: %v; it is set aside until it can be (renaming the job avoids any of Nomad's routing by ID)",
		u.ID, u.Namespace, u.Err)
}

func (u *Unreadable) Unwrap() error { return u.Err }

// Job reads the full definition of job id in namespace ns. It returns
// ErrGone when Nomad has no such job, an *Unreadable when the job's own
// read fails (a Nomad error about it, or an answer that does not decode or
// names another job), and any other error as it is: Nomad cannot be
// reached, the context ended, or the token was refused (those fail every
// read alike).
func Job(ctx context.Context, c *api.Client, ns, id string) (*api.Job, error) {
	q := (&api.QueryOptions{Namespace: ns}).WithContext(ctx)
	var job *api.Job
	var err error
	if strings.Contains(id, "/") {
		var resp struct{ Versions []*api.Job }
		if _, err = c.Raw().Query(Path(id)+"/versions", &resp, q); err == nil {
			if len(resp.Versions) == 0 || resp.Versions[0] == nil {
				return nil, ErrGone
			}
			job = resp.Versions[0]
		}
	} else {
		job = new(api.Job)
		_, err = c.Raw().Query(Path(id), job, q)
	}
	if err != nil {
		return nil, classify(ctx, ns, id, err)
	}
	if deref(job.ID) != id || nsOr(deref(job.Namespace)) != nsOr(ns) {
		return nil, &Unreadable{Namespace: ns, ID: id, Err: fmt.Errorf("Nomad answered with job %q in namespace %q", deref(job.ID), deref(job.Namespace))}
	}
	return job, nil
}

// Path is the API path of job id: /v1/job/ and the ID with every byte
// escaped but letters, digits, '-', '_' and '~' (a '.' too, so that no ID
// is a dot segment).
func Path(id string) string {
	var b strings.Builder
	b.WriteString("/v1/job/")
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// classify tells a failed read of one job (Unreadable) from a failure of
// every read (returned as it is) and a job that is gone.
func classify(ctx context.Context, ns, id string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		switch ue.StatusCode() {
		case 404:
			return ErrGone
		case 401, 403:
			return err
		}
		return &Unreadable{Namespace: ns, ID: id, Err: err}
	}
	var transport *url.Error
	if errors.As(err, &transport) {
		return err
	}
	// The answer did not decode (an array, another shape).
	return &Unreadable{Namespace: ns, ID: id, Err: err}
}

func nsOr(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
