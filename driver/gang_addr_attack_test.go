package driver

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/lease"
)

// TestRendezvousRefusesForgedAddress: a compromised node's driver token
// may write any gang's rendezvous records; one naming rank 0 at an address
// of the attacker's would have every rank meet there (MASTER_ADDR) and
// talk to its store. With the addresses the planner wrote in the lease
// (each part's node's fingerprinted gang address), a rank refuses a
// record whose address is not its part's. Before: rank 1 took the forged
// record's address as MASTER_ADDR.
func TestRendezvousRefusesForgedAddress(t *testing.T) {
	l := gangLease()
	l.Parts[0].Addr, l.Parts[1].Addr = "127.0.0.1", "127.0.0.1"
	r := &fakeLeases{jobs: map[string]*lease.JobLease{lease.JobKey(testNamespace, "gang"): l}}
	g := newMemGang()
	forged := lease.GangMember{Rank: 0, AllocID: "alloc-0", NodeID: "n0", Addr: "203.0.113.9", Port: 29500, UID: 90000, Joined: time.Now()}
	must.NoError(t, g.JoinGang(context.Background(), testNamespace, "gang", l.LeaseID, forged))
	members, held, err := rendezvous(context.Background(), r, g, gangTask("alloc-1"), gangPart{lease: *l, rank: 1}, "127.0.0.1", 2*time.Second, 0)
	held.release()
	if err == nil {
		t.Fatalf("rank 1 gathered with a forged rank 0 record: MASTER_ADDR %s", gangEnv(gangPart{lease: *l, rank: 1}, members)[EnvMasterAddr])
	}
	must.ErrorContains(t, err, `rank 0's record names address 203.0.113.9, not 127.0.0.1`)
}
