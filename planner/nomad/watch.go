package nomad

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// Watch follows Nomad's event stream for jobs, allocations, evaluations and
// nodes from index and calls poke after every batch of events. It returns
// when the stream ends or fails (the caller resyncs and calls it again) with
// the last index seen. Every (re)start of the stream makes the next
// Snapshot list everything (lists.go), as the resync it triggers always did.
// The batch's writes to the tables Snapshot reads count into the change
// mark before poke (marks.go sawEvents).
func (c *Client) Watch(ctx context.Context, index uint64, poke func()) (uint64, error) {
	c.ForceFullList()
	topics := map[api.Topic][]string{
		api.TopicJob:        {"*"},
		api.TopicAllocation: {"*"},
		api.TopicEvaluation: {"*"},
		api.TopicNode:       {"*"},
	}
	ch, err := c.api.EventStream().Stream(ctx, topics, index, &api.QueryOptions{Namespace: "*"})
	if err != nil {
		return index, denied(fmt.Errorf("open event stream: %w", err), "the event stream (GET /v1/event/stream)", `read-job in namespace "*" and node { policy = "read" }`)
	}
	for {
		select {
		case <-ctx.Done():
			return index, ctx.Err()
		case evs, ok := <-ch:
			if !ok {
				return index, fmt.Errorf("event stream closed")
			}
			if evs.Err != nil {
				return index, denied(fmt.Errorf("event stream: %w", evs.Err), "the event stream (GET /v1/event/stream)", `read-job in namespace "*" and node { policy = "read" }`)
			}
			if evs.IsHeartbeat() {
				continue
			}
			if evs.Index > index {
				index = evs.Index
			}
			c.sawEvents(evs.Events)
			poke()
		}
	}
}
