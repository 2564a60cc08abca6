package driver

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/lease"
)

// memGang is the GangRendezvous double: members in memory, a change wakes
// the waiters.
type memGang struct {
	mu      sync.Mutex
	members map[string][]lease.GangMember // by lease ID
	index   uint64
	changed chan struct{}
}

func newMemGang() *memGang {
	return &memGang{members: map[string][]lease.GangMember{}, changed: make(chan struct{})}
}

func (g *memGang) JoinGang(_ context.Context, _, _, leaseID string, m lease.GangMember) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members[leaseID] = append(g.members[leaseID], m)
	g.index++
	close(g.changed)
	g.changed = make(chan struct{})
	return nil
}

func (g *memGang) GangMembers(ctx context.Context, _, _, leaseID string, wait uint64) ([]lease.GangMember, uint64, error) {
	g.mu.Lock()
	if g.index <= wait {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	return append([]lease.GangMember(nil), g.members[leaseID]...), g.index, nil
}

func gangLease() *lease.JobLease {
	return &lease.JobLease{LeaseID: "gang-1", Namespace: testNamespace, JobID: "gang", NodeID: "n0", NodeName: "node-0",
		GPUs: []string{"a0", "a1", "b0", "b1"},
		Parts: []lease.Part{
			{NodeID: "n0", NodeName: "node-0", GPUs: []string{"a0", "a1"}},
			{NodeID: "n1", NodeName: "node-1", GPUs: []string{"b0", "b1"}},
		}}
}

func gangTask(alloc string) *drivers.TaskConfig {
	return &drivers.TaskConfig{ID: alloc + "/t", AllocID: alloc, Name: "t", JobID: "gang", Namespace: testNamespace}
}

func TestFindPart(t *testing.T) {
	r := &fakeLeases{jobs: map[string]*lease.JobLease{lease.JobKey(testNamespace, "gang"): gangLease()}}
	p, ok, err := findPart(context.Background(), r, gangTask("x"), []string{"b1", "b0"})
	must.NoError(t, err)
	must.True(t, ok)
	must.Eq(t, 1, p.rank)
	must.Eq(t, 2, p.size())

	_, _, err = findPart(context.Background(), r, gangTask("x"), []string{"a0", "b0"})
	must.ErrorIs(t, err, ErrNoGrant)

	one := &fakeLeases{jobs: map[string]*lease.JobLease{lease.JobKey(testNamespace, "gang"): {LeaseID: "l", GPUs: []string{"a0"}}}}
	_, ok, err = findPart(context.Background(), one, gangTask("x"), []string{"a0", "a1"})
	must.NoError(t, err)
	must.False(t, ok)
}

// Both parts gather: each waits for the other, and both see rank 0's
// address and port as the gang's master.
func TestRendezvousGathersEveryRank(t *testing.T) {
	l := gangLease()
	r := &fakeLeases{jobs: map[string]*lease.JobLease{lease.JobKey(testNamespace, "gang"): l}}
	g := newMemGang()
	envs := make([]map[string]string, 2)
	rank0UIDs := make([]int, 2)
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rank == 1 {
				time.Sleep(100 * time.Millisecond) // rank 0 waits for it
			}
			part := gangPart{lease: *l, rank: rank}
			// Each rank offers a uid; rank 0's is the gang's.
			members, held, err := rendezvous(context.Background(), r, g, gangTask("alloc-"+strconv.Itoa(rank)), part, "127.0.0.1", 5*time.Second, 90000+rank)
			held.release()
			if err != nil {
				t.Errorf("rank %d: %v", rank, err)
				return
			}
			envs[rank], rank0UIDs[rank] = gangEnv(part, members), members[0].UID
		}()
	}
	wg.Wait()
	for rank, env := range envs {
		must.Eq(t, "2", env[EnvGangSize])
		must.Eq(t, strconv.Itoa(rank), env[EnvGangRank])
		must.Eq(t, "2", env[EnvGPUsPerNode])
		must.Eq(t, "127.0.0.1,127.0.0.1", env[EnvGangPeers])
		must.Eq(t, "127.0.0.1", env[EnvMasterAddr])
		must.NotEq(t, "0", env[EnvMasterPort])
	}
	must.Eq(t, envs[0][EnvMasterPort], envs[1][EnvMasterPort])
	must.Eq(t, []int{90000, 90000}, rank0UIDs)
}

// A part alone gives up when the planner takes the gang back, and after
// gang_timeout otherwise.
func TestRendezvousGivesUp(t *testing.T) {
	l := gangLease()
	r := &fakeLeases{jobs: map[string]*lease.JobLease{lease.JobKey(testNamespace, "gang"): l}}
	start := time.Now()
	_, _, err := rendezvous(context.Background(), r, newMemGang(), gangTask("a"), gangPart{lease: *l, rank: 1}, "127.0.0.1", 300*time.Millisecond, 0)
	must.ErrorContains(t, err, "1 of 2 parts joined within 300ms")
	must.Less(t, 3*time.Second, time.Since(start))

	revoked := *l
	revoked.Revoke = &lease.Revoke{Reason: "gang broken: its part on node-1 is lost"}
	r.jobs[lease.JobKey(testNamespace, "gang")] = &revoked
	_, _, err = rendezvous(context.Background(), r, newMemGang(), gangTask("a"), gangPart{lease: *l, rank: 0}, "127.0.0.1", time.Minute, 0)
	must.ErrorContains(t, err, "taking the gang back")

	delete(r.jobs, lease.JobKey(testNamespace, "gang"))
	_, _, err = rendezvous(context.Background(), r, newMemGang(), gangTask("a"), gangPart{lease: *l, rank: 0}, "127.0.0.1", time.Minute, 0)
	must.True(t, strings.Contains(err.Error(), "was released"))
}
