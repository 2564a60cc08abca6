package e2e

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/policies"
)

// Two `themis planner` processes: the one holding the leader lock serves
// the API; the standby answers 503 naming it (its API in X-Themis-Leader),
// `themis status -queue` asked of the standby prints the leader's queue,
// and once the leader stops the standby takes over and serves the view.
func TestAPIStandby(t *testing.T) {
	if err := stopPlanner(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { startPlanner(plannerSetup{policy: policies.FIFO{}}) })
	ctx, cancel := context.WithTimeout(env.ctx, 3*time.Minute)
	defer cancel()

	start := func(id string) (*exec.Cmd, string) {
		addr := freeAddr(t)
		return startPlannerProcess(t, id, "-http-addr", addr), "http://" + addr
	}
	planner := func(url string) (httpapi.PlannerResponse, error) {
		var p httpapi.PlannerResponse
		_, err := (&httpapi.Client{Addr: url}).Get(ctx, "/v1/planner", 0, 0, &p)
		return p, err
	}

	first, firstURL := start("e2e-first")
	// A planner killed by an earlier test may hold the lock until its
	// liveness check goes critical (3 s; longer with the fallback session).
	eventually(t, 90*time.Second, "e2e-first leads", func() (bool, error) {
		p, err := planner(firstURL)
		return err == nil && p.Leading && !p.Round.Time.IsZero(), nil
	})
	second, secondURL := start("e2e-second")
	eventually(t, 30*time.Second, "e2e-second serves its API", func() (bool, error) {
		_, err := planner(secondURL)
		return err == nil, nil
	})

	resp, err := httpGet(ctx, secondURL+"/v1/queue")
	if err != nil {
		t.Fatal(err)
	}
	if resp.code != 503 || resp.header.Get(httpapi.LeaderHeader) != firstURL || !strings.Contains(resp.body, "e2e-first leads at "+firstURL) {
		t.Fatalf("the standby answered %d, %s %q: %s; want 503 naming e2e-first at %s",
			resp.code, httpapi.LeaderHeader, resp.header.Get(httpapi.LeaderHeader), resp.body, firstURL)
	}
	p, err := planner(secondURL)
	if err != nil || p.Leading || p.Leader == nil || p.Leader.ID != "e2e-first" {
		t.Fatalf("the standby's /v1/planner: %+v, %v", p, err)
	}

	out, err := exec.Command(env.themis, "status", "-queue", "-addr", secondURL, "-consul-addr", env.stack.ConsulAddr()).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "VC ") || bytes.Contains(out, []byte("no planner API")) {
		t.Fatalf("themis status -queue through the standby: %v\n%s", err, out)
	}

	// The leader stops (releasing the lock): the standby leads.
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	eventually(t, 60*time.Second, "e2e-second leads and serves the view", func() (bool, error) {
		var q httpapi.QueueResponse
		_, err := (&httpapi.Client{Addr: secondURL}).Get(ctx, "/v1/queue", 0, 0, &q)
		return err == nil, nil
	})
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
