package plannertest

import "testing"

// CheckNoTaskWithoutLease is invariant 1 seen from Nomad: every job with an
// allocation that is not terminal, or lost while its task still runs
// (Alloc.Orphan), holds a lease on that allocation's node
// (and Store keeps leases' GPUs disjoint), so no two running jobs share a
// GPU.
func CheckNoTaskWithoutLease(t testing.TB, n *Nomad, s *Store, when string) {
	t.Helper()
	for k, as := range n.Allocs {
		for _, a := range as {
			if !a.Terminal() || a.Orphan {
				l, ok := s.JobLeases[k]
				if !ok {
					t.Fatalf("%s: %s has allocation %s %s but no lease", when, k, a.ID, a.ClientStatus)
				}
				if !l.OnNode(a.NodeID) {
					t.Fatalf("%s: %s has allocation %s on node %s, which its lease (%s) does not hold", when, k, a.ID, a.NodeID, l.NodeNames())
				}
			}
		}
	}
}

// CheckGPUsLeasedOnce fails when two leases hold one GPU.
func CheckGPUsLeasedOnce(t testing.TB, s *Store) {
	t.Helper()
	held := map[string]string{}
	for k, l := range s.JobLeases {
		for _, g := range l.GPUs {
			if other, dup := held[g]; dup {
				t.Fatalf("GPU %s leased to %s and %s", g, other, k)
			}
			held[g] = k.String()
		}
	}
}
