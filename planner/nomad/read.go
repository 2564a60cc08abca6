package nomad

import (
	"context"
	"errors"
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// readJob reads a listed job's definition (whatever its ID: nomadread) and
// parses it: nil for a job with no themis task. A job that cannot be read
// or parsed is a *nomadread.Unreadable, which fails only that job;
// nomadread.ErrGone means it was purged since the list; any other error
// fails the snapshot (Nomad unreachable, the token refused).
func (c *Client) readJob(ctx context.Context, key core.JobKey) (*Job, error) {
	full, err := nomadread.Job(ctx, c.api, key.Namespace, key.ID)
	var bad *nomadread.Unreadable
	switch {
	case errors.Is(err, nomadread.ErrGone), errors.As(err, &bad):
		return nil, err
	case err != nil:
		return nil, denied(fmt.Errorf("read job %s: %w", key, err), "read job "+key.String(), `read-job in namespace "`+key.Namespace+`"`)
	}
	tj, err := ParseJob(full)
	switch {
	case errors.Is(err, ErrNotThemis):
		return nil, nil
	case err != nil:
		return nil, &nomadread.Unreadable{Namespace: key.Namespace, ID: key.ID, Err: fmt.Errorf("parse: %w", err)}
	}
	return tj, nil
}
