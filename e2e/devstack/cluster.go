package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Cluster is a Nomad cluster of agents that are not -dev: a server
// (bootstrap_expect = 1) and one or more clients with the themis plugins,
// each keeping its state in its own data dir, so that a client can be
// stopped and started again the way an operator restarts a client while the
// server stays up. Each client is a node of the topology file, with its own
// data dir, HTTP port, advertised address and cgroup parent; all share one
// checkpoint root, so that a job can resume on another node. They are
// rendered from nomad-server.hcl.tmpl and nomad-client.hcl.tmpl and use a
// Consul agent that is already running (Ports.ConsulHTTP) without
// registering or joining through it.
type Cluster struct {
	s          *Stack // procs: the server, then the clients that run
	serverConf string
	server     *exec.Cmd // nil while stopped
	clients    []*client
	// pgids are the process groups of every run of every client, for Close.
	pgids []int
}

type client struct {
	node, conf string
	port       int
	cmd        *exec.Cmd // nil while stopped
}

// StartCluster starts the server, waits until it leads and holds an active
// root key (so that the clients' node identities are signed and checked
// without retries), starts the clients and waits until every one is up and
// its node ready with the themis driver healthy and its themis GPUs
// fingerprinted. cfg needs NomadBin, PluginDir, Templates, Topology, Nodes
// (or NodeName), DataDir and Ports.ConsulHTTP; zero Nomad ports pick free
// ones. With ACL (and ACLTokens, from a Consul agent started with ACL) it
// bootstraps the server's ACLs once it leads and loads the Nomad policies
// before the clients start, which run with ACLs on and the themis driver
// with the driver's Consul token.
//
// When an agent lost one of its ports to another socket before it bound it
// (ports.go), StartCluster tries again on fresh ports, up to three times,
// if the data dir held no server state before: the failed try's state
// (which names its ports) is removed first.
func StartCluster(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	serverDir := filepath.Join(cfg.DataDir, "server")
	_, err := os.Stat(serverDir)
	fresh := errors.Is(err, fs.ErrNotExist)
	for try := 1; ; try++ {
		c, err := startCluster(ctx, cfg)
		if err == nil || !fresh || !errors.Is(err, errPortInUse) || try == 3 {
			return c, err
		}
		cfg.Log.Warn("a Nomad agent lost a port before it bound it; starting the cluster again on fresh ports", "try", try, "error", err)
		stale, _ := filepath.Glob(filepath.Join(cfg.DataDir, "client-*"))
		for _, d := range append(stale, serverDir) {
			if err := os.RemoveAll(d); err != nil {
				return nil, fmt.Errorf("devstack: remove the failed try's state: %w", err)
			}
		}
	}
}

func startCluster(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.check(false, !cfg.ServerOnly); err != nil {
		return nil, err
	}
	if cfg.ServerOnly && cfg.NomadBin == "" {
		return nil, errors.New("devstack: nomad binary not set")
	}
	if cfg.ACL && (cfg.ACLTokens.Management == "" || cfg.ACLTokens.DriverConsul == "") {
		return nil, errors.New("devstack: StartCluster with ACL needs ACLTokens, the tokens of a Consul agent started with ACL (StartConsul)")
	}
	if cfg.Ports.ConsulHTTP == 0 {
		return nil, errors.New("devstack: StartCluster needs Ports.ConsulHTTP, the port of a running Consul agent")
	}
	nodes := cfg.Nodes
	if len(nodes) == 0 && !cfg.ServerOnly {
		nodes = []string{cfg.NodeName}
	}
	p := &cfg.Ports
	if err := fillPorts(&p.NomadHTTP, &p.NomadRPC, &p.NomadSerf); err != nil {
		return nil, err
	}
	c := &Cluster{s: &Stack{cfg: cfg}}
	if cfg.ACL {
		// Consul's tokens; nomadACL adds Nomad's.
		t := cfg.ACLTokens
		c.s.tokens = Tokens{Management: t.Management, PlannerConsul: t.PlannerConsul, DriverConsul: t.DriverConsul, OperatorConsul: t.OperatorConsul}
	}
	for i, node := range nodes {
		cl := &client{node: node}
		if p.NomadClientHTTP != 0 {
			cl.port = p.NomadClientHTTP + i
		}
		if err := fillPorts(&cl.port); err != nil {
			return nil, err
		}
		c.clients = append(c.clients, cl)
	}
	var clientDirs []string
	for _, cl := range c.clients {
		clientDirs = append(clientDirs, c.clientDir(cl))
	}
	if err := prepareDirs(cfg.DataDir, clientDirs...); err != nil {
		return nil, err
	}
	var err error
	server := map[string]any{"ServerName": "themis-server"}
	if len(cfg.Nodes) == 0 && !cfg.ServerOnly {
		server["ServerName"] = cfg.NodeName + "-server"
	}
	if c.serverConf, err = c.s.render("nomad-server.hcl.tmpl", "nomad-server.hcl", server); err != nil {
		return nil, err
	}
	for _, cl := range c.clients {
		if cl.conf, err = c.s.render("nomad-client.hcl.tmpl", "nomad-client-"+cl.node+".hcl", c.clientData(cl)); err != nil {
			return nil, err
		}
	}
	if err := c.s.spawn("nomad-server", cfg.NomadBin, "agent", "-config", c.serverConf); err != nil {
		return nil, err
	}
	c.server = c.s.procs[len(c.s.procs)-1]
	if cfg.ACL {
		if err := c.s.nomadACL(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.s.waitFor(ctx, "Nomad server with an active root key", 60*time.Second, c.keyReady); err != nil {
		c.Close()
		return nil, err
	}
	for i := range c.clients {
		if err := c.spawnClient(i, os.O_TRUNC); err != nil {
			c.Close()
			return nil, err
		}
	}
	if len(nodes) == 0 {
		return c, nil // ServerOnly
	}
	if err := c.s.waitFor(ctx, fmt.Sprintf("%d Nomad clients up, their nodes with themis GPUs and driver", len(nodes)), 90*time.Second, c.clientsReady); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// clientDir is a client's Nomad data dir.
func (c *Cluster) clientDir(cl *client) string {
	return filepath.Join(absPath(c.s.cfg.DataDir), "client-"+cl.node)
}

// clientData are a client's own fields of nomad-client.hcl.tmpl.
func (c *Cluster) clientData(cl *client) map[string]any {
	// Each client gets a cgroup parent of its own, so that two clients do
	// not manage one cpuset partition. Dashes are nesting in systemd slice
	// names.
	name := "themis_" + strings.ReplaceAll(cl.node, "-", "_")
	parent := "/" + name
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		parent = name + ".slice" // cgroups v2
	}
	return map[string]any{
		"NodeName": cl.node, "NomadClientHTTP": cl.port, "CgroupParent": parent,
		"ClientDir":  c.clientDir(cl),
		"LeaseCheck": !c.s.cfg.NoLeaseCheck,
	}
}

func (c *Cluster) spawnClient(i int, logFlag int) error {
	cl := c.clients[i]
	if err := c.s.spawnLog(logFlag, "nomad-client-"+cl.node, c.s.cfg.NomadBin, "agent", "-config", cl.conf); err != nil {
		return err
	}
	cl.cmd = c.s.procs[len(c.s.procs)-1]
	c.pgids = append(c.pgids, cl.cmd.Process.Pid)
	return nil
}

// keyReady: the server's keyring has an active root key.
func (c *Cluster) keyReady(ctx context.Context) (bool, error) {
	var keys []struct{ KeyID, State string }
	if err := getJSONToken(ctx, c.NomadAddr()+"/v1/operator/keyring/keys", c.s.tokens.Management, &keys); err != nil {
		return false, err
	}
	for _, k := range keys {
		if k.State == "active" {
			return true, nil
		}
	}
	return false, errors.New("no active root key yet")
}

// clientsReady: every running client agent answers (it restores its tasks
// before it serves HTTP) and the server has its node ready.
func (c *Cluster) clientsReady(ctx context.Context) (bool, error) {
	var names []string
	for i, cl := range c.clients {
		if cl.cmd == nil {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ClientAddr(i)+"/v1/agent/health?type=client", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("client %s health: %s", cl.node, resp.Status)
		}
		names = append(names, cl.node)
	}
	return c.s.nodesReady(ctx, names)
}

// NomadRPCAddr is the server's RPC address (host:port), where Nomad
// clients, and simulated ones, connect.
func (c *Cluster) NomadRPCAddr() string {
	return "127.0.0.1:" + strconv.Itoa(c.s.cfg.Ports.NomadRPC)
}

// NomadAddr is the server's HTTP address (URL).
func (c *Cluster) NomadAddr() string { return c.s.NomadAddr() }

// Tokens are the cluster's ACL tokens (Config.ACL): Consul's, from
// Config.ACLTokens, and the Nomad tokens it created; zero without ACL.
func (c *Cluster) Tokens() Tokens { return c.s.tokens }

// Nodes are the clients' node names, in order.
func (c *Cluster) Nodes() []string {
	var names []string
	for _, cl := range c.clients {
		names = append(names, cl.node)
	}
	return names
}

// ClientAddr is client i's HTTP address (URL).
func (c *Cluster) ClientAddr(i int) string {
	return "http://127.0.0.1:" + strconv.Itoa(c.clients[i].port)
}

// DataDir holds the rendered configs, the agents' data dirs and logs, and
// the clients' shared checkpoint root.
func (c *Cluster) DataDir() string { return c.s.cfg.DataDir }

// ServerLog and ClientLog are the agents' log files; every run of a
// client appends to its log.
func (c *Cluster) ServerLog() string { return filepath.Join(c.s.cfg.DataDir, "nomad-server.log") }
func (c *Cluster) ClientLog(i int) string {
	return filepath.Join(c.s.cfg.DataDir, "nomad-client-"+c.clients[i].node+".log")
}

// ServerPid is the process id of the Nomad server's agent, 0 when it is
// stopped.
func (c *Cluster) ServerPid() int {
	if c.server == nil {
		return 0
	}
	return c.server.Process.Pid
}

// ClientPid is the process id of client i's agent, 0 when it is stopped.
func (c *Cluster) ClientPid(i int) int {
	if c.clients[i].cmd == nil {
		return 0
	}
	return c.clients[i].cmd.Process.Pid
}

// StopClient stops client i's agent as an operator restarting it does:
// SIGINT to the agent's process alone, not to its process group (as
// systemd's KillMode=process, which Nomad's unit files use). A client that
// is not -dev leaves its tasks running on shutdown; it stops its plugin
// processes itself. If the agent has not exited after timeout, it is killed
// (the process alone) and StopClient says so.
func (c *Cluster) StopClient(i int, timeout time.Duration) error {
	cl := c.clients[i]
	if cl.cmd == nil {
		return fmt.Errorf("devstack: Nomad client %s is not running", cl.node)
	}
	done, log := c.s.forget(cl.cmd)
	cmd := cl.cmd
	cl.cmd = nil
	defer log.Close()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("devstack: interrupt Nomad client %s: %w", cl.node, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("devstack: Nomad client %s did not stop within %s of SIGINT; killed it (see %s)", cl.node, timeout, c.ClientLog(i))
	}
}

// KillClient kills client i's agent with SIGKILL, the agent's process
// alone, as a crash or the OOM killer does: it stops nothing, so its tasks'
// executors, and the tasks, keep running, and its node misses its
// heartbeats until StartClient.
func (c *Cluster) KillClient(i int) error {
	cl := c.clients[i]
	if cl.cmd == nil {
		return fmt.Errorf("devstack: Nomad client %s is not running", cl.node)
	}
	done, log := c.s.forget(cl.cmd)
	cmd := cl.cmd
	cl.cmd = nil
	defer log.Close()
	if err := cmd.Process.Kill(); err != nil {
		return fmt.Errorf("devstack: kill Nomad client %s: %w", cl.node, err)
	}
	<-done
	return nil
}

// StartClient starts the stopped client i again with the same config and
// data dir, and waits until it is up and its node ready.
func (c *Cluster) StartClient(ctx context.Context, i int) error {
	if c.clients[i].cmd != nil {
		return fmt.Errorf("devstack: Nomad client %s is running", c.clients[i].node)
	}
	if err := c.spawnClient(i, os.O_APPEND); err != nil {
		return err
	}
	return c.s.waitFor(ctx, "Nomad client "+c.clients[i].node+" up, its node with themis GPUs and driver", 90*time.Second, c.clientsReady)
}

// StopServer stops the Nomad server as an operator restarting it does
// (SIGINT to the agent alone; its state stays in its data dir). The clients
// keep running their tasks and retry the server until it is back.
func (c *Cluster) StopServer(timeout time.Duration) error {
	if c.server == nil {
		return errors.New("devstack: the Nomad server is not running")
	}
	done, log := c.s.forget(c.server)
	cmd := c.server
	c.server = nil
	defer log.Close()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("devstack: interrupt the Nomad server: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("devstack: the Nomad server did not stop within %s of SIGINT; killed it (see %s)", timeout, c.ServerLog())
	}
}

// StartServer starts the stopped server again with its config and data
// dir, and waits until it leads with an active root key and every running
// client's node is ready again.
func (c *Cluster) StartServer(ctx context.Context) error {
	if c.server != nil {
		return errors.New("devstack: the Nomad server is running")
	}
	if err := c.s.spawnLog(os.O_APPEND, "nomad-server", c.s.cfg.NomadBin, "agent", "-config", c.serverConf); err != nil {
		return err
	}
	c.server = c.s.procs[len(c.s.procs)-1]
	c.pgids = append(c.pgids, c.server.Process.Pid)
	if err := c.s.waitFor(ctx, "the Nomad server with an active root key", 60*time.Second, c.keyReady); err != nil {
		return err
	}
	return c.s.waitFor(ctx, "the Nomad clients' nodes ready again", 90*time.Second, c.clientsReady)
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
