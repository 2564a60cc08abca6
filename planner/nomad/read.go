package nomad

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// readers is how many jobs readJobs reads at once: a burst of submissions
// (a sweep of hundreds of jobs) is read in one round, and each read is a
// round trip to the server.
const readers = 8

// jobRead is one job's readJob.
type jobRead struct {
	job *Job
	err error
}

// readJobs reads keys (readJob), up to readers at once.
func (c *Client) readJobs(ctx context.Context, keys []core.JobKey) map[core.JobKey]jobRead {
	out := make(map[core.JobKey]jobRead, len(keys))
	if len(keys) == 0 {
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan core.JobKey)
	for range min(readers, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				j, err := c.readJob(ctx, k)
				mu.Lock()
				out[k] = jobRead{job: j, err: err}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	return out
}
