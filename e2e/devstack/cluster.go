package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Cluster is a Nomad cluster of two agents that are not -dev: a server
// (bootstrap_expect = 1) and one client with the themis plugins, each keeping
// its state in its own data dir, so that the client can be stopped and
// started again the way an operator restarts a client while the server stays
// up. They are rendered from nomad-server.hcl.tmpl and nomad-client.hcl.tmpl
// and use a Consul agent that is already running (Ports.ConsulHTTP) without
// registering or joining through it.
type Cluster struct {
	s                      *Stack // procs: the server, then the client
	serverConf, clientConf string
	// pgids are the process groups of every run of the client, for Close.
	pgids []int
}

// StartCluster starts the server, waits until it leads and holds an active
// root key (so that the client's node identity is signed and checked
// without retries), starts the client and waits until its node is ready
// with the themis driver healthy and its themis GPUs fingerprinted. cfg needs
// NomadBin, PluginDir, Templates, Topology, NodeName, DataDir and
// Ports.ConsulHTTP; zero Nomad ports pick free ones.
func StartCluster(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if err := cfg.check(false, true); err != nil {
		return nil, err
	}
	if cfg.Ports.ConsulHTTP == 0 {
		return nil, errors.New("devstack: StartCluster needs Ports.ConsulHTTP, the port of a running Consul agent")
	}
	p := &cfg.Ports
	if err := fillPorts(&p.NomadHTTP, &p.NomadRPC, &p.NomadSerf, &p.NomadClientHTTP); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{s: &Stack{cfg: cfg}}
	var err error
	if c.serverConf, err = c.s.render("nomad-server.hcl.tmpl", "nomad-server.hcl"); err != nil {
		return nil, err
	}
	if c.clientConf, err = c.s.render("nomad-client.hcl.tmpl", "nomad-client.hcl"); err != nil {
		return nil, err
	}
	if err := c.s.spawn("nomad-server", cfg.NomadBin, "agent", "-config", c.serverConf); err != nil {
		return nil, err
	}
	if err := c.s.waitFor(ctx, "Nomad server with an active root key", 60*time.Second, c.keyReady); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.startClient(ctx, os.O_TRUNC); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startClient(ctx context.Context, logFlag int) error {
	if err := c.s.spawnLog(logFlag, "nomad-client", c.s.cfg.NomadBin, "agent", "-config", c.clientConf); err != nil {
		return err
	}
	c.pgids = append(c.pgids, c.ClientPid())
	return c.s.waitFor(ctx, "Nomad client up, its node with themis GPUs and driver", 90*time.Second, c.clientReady)
}

// keyReady: the server's keyring has an active root key.
func (c *Cluster) keyReady(ctx context.Context) (bool, error) {
	var keys []struct{ KeyID, State string }
	if err := getJSON(ctx, c.NomadAddr()+"/v1/operator/keyring/keys", &keys); err != nil {
		return false, err
	}
	for _, k := range keys {
		if k.State == "active" {
			return true, nil
		}
	}
	return false, errors.New("no active root key yet")
}

// clientReady: the client agent answers (it restores its tasks before it
// serves HTTP) and the server has its node ready.
func (c *Cluster) clientReady(ctx context.Context) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ClientAddr()+"/v1/agent/health?type=client", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("client health: %s", resp.Status)
	}
	return c.s.nomadReady(ctx)
}

// NomadAddr is the server's HTTP address (URL).
func (c *Cluster) NomadAddr() string { return c.s.NomadAddr() }

// ClientAddr is the client agent's HTTP address (URL).
func (c *Cluster) ClientAddr() string {
	return "http://127.0.0.1:" + strconv.Itoa(c.s.cfg.Ports.NomadClientHTTP)
}

// ServerLog and ClientLog are the agents' log files; every run of the
// client appends to its log.
func (c *Cluster) ServerLog() string { return filepath.Join(c.s.cfg.DataDir, "nomad-server.log") }
func (c *Cluster) ClientLog() string { return filepath.Join(c.s.cfg.DataDir, "nomad-client.log") }

// ClientPid is the process id of the running client agent, 0 when it is
// stopped.
func (c *Cluster) ClientPid() int {
	if len(c.s.procs) < 2 {
		return 0
	}
	return c.s.procs[1].Process.Pid
}

// StopClient stops the client agent as an operator restarting it does:
// SIGINT to the agent's process alone, not to its process group (as
// systemd's KillMode=process, which Nomad's unit files use). A client that
// is not -dev leaves its tasks running on shutdown; it stops its plugin
// processes itself. If the agent has not exited after timeout, it is killed
// (the process alone) and StopClient says so.
func (c *Cluster) StopClient(timeout time.Duration) error {
	if len(c.s.procs) < 2 {
		return errors.New("devstack: Nomad client is not running")
	}
	cmd, done, log := c.s.procs[1], c.s.exited[1], c.s.logs[1]
	defer func() {
		log.Close()
		c.s.procs, c.s.logs, c.s.exited = c.s.procs[:1], c.s.logs[:1], c.s.exited[:1]
	}()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("devstack: interrupt Nomad client: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("devstack: Nomad client did not stop within %s of SIGINT; killed it (see %s)", timeout, c.ClientLog())
	}
}

// StartClient starts the stopped client agent again with the same config and
// data dir, and waits until it is up and its node ready.
func (c *Cluster) StartClient(ctx context.Context) error {
	if len(c.s.procs) != 1 {
		return errors.New("devstack: StartClient needs a running server and a stopped client")
	}
	return c.startClient(ctx, os.O_APPEND)
}

// Close stops the agents that run, kills what is left in the process groups
// of the client's runs (plugins), and unmounts what the client left mounted
// under the data dir (the secrets tmpfs of tasks it did not clean up), so
// that the data dir can be removed. It does not reach task processes:
// executors run in sessions of their own.
func (c *Cluster) Close() {
	c.s.Stop()
	for _, pgid := range c.pgids {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	c.pgids = nil
	if err := unmountUnder(c.s.cfg.DataDir); err != nil {
		c.s.cfg.Log.Warn("could not unmount everything under the data dir", "dir", c.s.cfg.DataDir, "error", err)
	}
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Field 5 is the mount point, with spaces and the like as octal
		// escapes.
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if strings.HasPrefix(p, abs+string(filepath.Separator)) {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
