package planner

import (
	"context"
	"fmt"
	"github.com/themis-nomad/themis/planner/plannertest"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// slowStart is a Nomad whose node pool call hangs until the caller gives
// up, as a Nomad that is still starting does.
type slowStart struct{ *plannertest.Nomad }

func (s slowStart) EnsurePendingPool(ctx context.Context) error {
	<-ctx.Done()
	return fmt.Errorf("create node pool %q: %w", s.PendingPool(), ctx.Err())
}

// A planner stopped while it starts (its node pool call, or its first
// round, still in flight) ends quietly: Run returns nil, not the error of
// the call the stop interrupted.
func TestStoppedDuringStartUpEndsQuietly(t *testing.T) {
	clock := time.Unix(0, 0)
	for name, nc := range map[string]Cluster{
		"node pool":   slowStart{plannertest.NewNomad(&clock, 8)},
		"first round": plannertest.NewNomad(&clock, 8),
	} {
		t.Run(name, func(t *testing.T) {
			p := New(Config{Nomad: nc, Store: plannertest.NewStore(), Stack: stack.Of(policies.FIFO{})})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			time.Sleep(20 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run stopped during start-up returned %v, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return within 5 s of its context's end")
			}
		})
	}
}
