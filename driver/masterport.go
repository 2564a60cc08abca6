package driver

import (
	"net"
)

// Rank 0's MASTER_PORT. The driver picks the port of the workload's own
// rendezvous (torch.distributed's store) when rank 0 joins the gang and
// publishes it; the workload binds it when it starts, after the whole gang
// has gathered (up to gang_timeout). A port picked and closed at once is
// free all that while: another local task could bind it and serve every
// rank's rendezvous store. So the driver keeps it bound and listening
// (accepting nothing) from the pick until just before it launches the
// workload; only the workload's own start (its interpreter's imports) is
// left for a squatter to race, and a squatter that wins makes the
// workload fail to bind rather than go unnoticed.

// masterPort is rank 0's MASTER_PORT, held.
type masterPort struct{ l net.Listener }

// holdPort binds a free TCP port on addr and keeps it.
func holdPort(addr string) (*masterPort, int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return nil, 0, err
	}
	return &masterPort{l: l}, l.Addr().(*net.TCPAddr).Port, nil
}

// release frees the port for the workload; nil and a second release are
// no-ops.
func (p *masterPort) release() {
	if p != nil && p.l != nil {
		_ = p.l.Close()
		p.l = nil
	}
}
