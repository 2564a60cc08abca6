package devstack

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestFreePort: ports come from below the ephemeral range, each one free
// for TCP and UDP when handed out, and never the same one twice.
func TestFreePort(t *testing.T) {
	lo, hi := pickRange()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p >= hi {
			t.Fatalf("port %d outside %d-%d", p, lo, hi-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if err := portBusy(p); err != nil {
			t.Fatalf("port %d handed out busy: %v", p, err)
		}
	}
}

// TestPortBusyUDP: a port held only for UDP (as a serf agent holds it) is
// busy; fillPorts checks a port the config names.
func TestPortBusyUDP(t *testing.T) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	port := u.LocalAddr().(*net.UDPAddr).Port
	if portBusy(port) == nil {
		t.Fatalf("port %d held for UDP reads as free", port)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	err = fillPorts(&taken)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(taken)) {
		t.Fatalf("fillPorts of a taken port: %v", err)
	}
}

// TestWaitForAgentExit: an agent that exits while waited for is an error
// that carries the end of its log, and one that lost a port (the agents'
// "bind: address already in use") is errPortInUse, which start and
// StartCluster try again on; another exit is not.
func TestWaitForAgentExit(t *testing.T) {
	for _, tc := range []struct {
		out    string
		inUse  bool
		inText string
	}{
		{"==> Error starting agent: listen tcp 127.0.0.1:23456: bind: address already in use", true, "bind: address already in use"},
		{"==> config: unknown key nope", false, "unknown key nope"},
	} {
		s := &Stack{cfg: Config{DataDir: t.TempDir(), Log: hclog.NewNullLogger()}}
		if err := s.spawn("agent", "/bin/sh", "-c", "echo starting; echo '"+tc.out+"'; exit 1"); err != nil {
			t.Fatal(err)
		}
		err := s.waitFor(context.Background(), "its leader", 10*time.Second, func(context.Context) (bool, error) { return false, nil })
		s.Stop()
		if err == nil || !strings.Contains(err.Error(), tc.inText) || !strings.Contains(err.Error(), "sh exited while waiting for its leader") {
			t.Fatalf("%q: %v", tc.out, err)
		}
		if got := errors.Is(err, errPortInUse); got != tc.inUse {
			t.Fatalf("%q: errPortInUse %v, want %v (%v)", tc.out, got, tc.inUse, err)
		}
	}
}
