package driver

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/lease"
)

// TestMasterPortHeldWhileTheGangGathers: rank 0's MASTER_PORT, published
// in the rendezvous, cannot be bound by another local process while the
// gang gathers (it could then serve the workload's rendezvous store to
// every rank). Before: the driver asked the kernel for a free port and
// closed it at once: a squatter bound it for the whole gang wait.
func TestMasterPortHeldWhileTheGangGathers(t *testing.T) {
	l := gangLease()
	r := &fakeLeases{jobs: map[string]*lease.JobLease{lease.JobKey(testNamespace, "gang"): l}}
	g := newMemGang()
	type result struct {
		members []lease.GangMember
		held    *masterPort
		err     error
	}
	done := make(chan result, 1)
	go func() {
		members, held, err := rendezvous(context.Background(), r, g, gangTask("alloc-0"), gangPart{lease: *l, rank: 0}, "127.0.0.1", 10*time.Second, 90000)
		done <- result{members, held, err}
	}()
	var port int
	deadline := time.Now().Add(5 * time.Second)
	for port == 0 && time.Now().Before(deadline) {
		ms, _, _ := g.GangMembers(context.Background(), "", "", l.LeaseID, 0)
		if len(ms) > 0 {
			port = ms[0].Port
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	must.Positive(t, port, must.Sprint("rank 0 did not join"))
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if sq, err := net.Listen("tcp", addr); err == nil {
		sq.Close()
		t.Fatalf("a squatter bound rank 0's MASTER_PORT %d while the gang gathered", port)
	}
	_, held1, err := rendezvous(context.Background(), r, g, gangTask("alloc-1"), gangPart{lease: *l, rank: 1}, "127.0.0.1", 10*time.Second, 0)
	must.NoError(t, err)
	must.Nil(t, held1, must.Sprint("rank 1 holds no port"))
	res := <-done
	must.NoError(t, res.err)
	must.Eq(t, port, res.members[0].Port)
	// Gathered: still held until the driver launches the workload, then
	// the workload binds it.
	if sq, err := net.Listen("tcp", addr); err == nil {
		sq.Close()
		t.Fatalf("MASTER_PORT %d free before the launch", port)
	}
	res.held.release()
	wl, err := net.Listen("tcp", addr)
	must.NoError(t, err, must.Sprint("the workload cannot bind its MASTER_PORT after the release"))
	wl.Close()
}
