package devstack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports for agents are picked below the kernel's ephemeral range. A port
// the kernel hands out for 127.0.0.1:0 comes from that range, which is
// also where every outgoing connection (the tests' HTTP clients, Nomad's
// RPC, Consul's serf) takes its local port: in the time between picking it
// and the agent binding it, another socket can take it and the agent dies
// with "address already in use". Below the range only listeners that pick
// their port themselves compete, and a port is checked free for both TCP
// and UDP (serf binds both).

// errPortInUse marks an agent that exited because a port it was given was
// taken: start and StartCluster pick fresh ports and try again.
var errPortInUse = errors.New("a port it was given is in use")

var picked struct {
	sync.Mutex
	ports map[int]bool // handed out by this process: never twice
}

// FreePort returns a port of 127.0.0.1 that is free for TCP and UDP, below
// the ephemeral range and not handed out before by this process.
func FreePort() (int, error) {
	lo, hi := pickRange()
	picked.Lock()
	defer picked.Unlock()
	if picked.ports == nil {
		picked.ports = map[int]bool{}
	}
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if picked.ports[port] || portBusy(port) != nil {
			continue
		}
		picked.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("devstack: no free port in %d-%d after 200 tries", lo, hi-1)
}

// pickRange is [lo, hi): from 10000 up to the start of the ephemeral
// range (/proc/sys/net/ipv4/ip_local_port_range), or 20000-32767 where
// that cannot be read or leaves too little room.
func pickRange() (int, int) {
	lo, hi := 20000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start-10000 < 2000 {
		return lo, hi
	}
	return 10000, start
}

// portBusy is nil when 127.0.0.1:port can be bound for TCP and for UDP.
func portBusy(port int) error {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	u.Close()
	return nil
}

// fill replaces zero ports with free ones and checks that the others are
// free, so a clash is a clear error rather than an agent that dies.
func (p *Ports) fill() error {
	return fillPorts(&p.ConsulHTTP, &p.ConsulServer, &p.ConsulSerfLAN, &p.ConsulSerfWAN, &p.NomadHTTP, &p.NomadRPC, &p.NomadSerf)
}

func fillPorts(ports ...*int) error {
	for _, port := range ports {
		if *port == 0 {
			p, err := FreePort()
			if err != nil {
				return err
			}
			*port = p
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*port))
		if err != nil {
			return fmt.Errorf("devstack: port %d is in use (another `themis dev`, Nomad or Consul?): %w", *port, err)
		}
		l.Close()
	}
	return nil
}
