// Package devstack brings up a local themis-nomad stack of real agents: a
// Consul dev agent and a Nomad dev agent (server + client) with the themis
// device plugin and task driver, rendered from the agent config templates in
// examples/agents. `themis dev` uses it for the one-command bring-up and the
// e2e tests use it with free ports, so both run the same configuration.
// StartCluster brings up Nomad agents that are not -dev (a server and one or
// more clients that keep their state, each client a node of the topology
// file): the multi-node dev cluster of `themis dev -clients N` and the e2e
// tests, and a client that can be restarted.
package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
)

// Ports are the TCP ports of the stack; zero picks a free one.
type Ports struct {
	ConsulHTTP, ConsulServer, ConsulSerfLAN, ConsulSerfWAN int
	NomadHTTP, NomadRPC, NomadSerf                         int
	// NomadClientHTTP is the HTTP port of StartCluster's first client
	// agent; client i listens on NomadClientHTTP+i (zero: each a free
	// port). Start does not use it.
	NomadClientHTTP int
}

// DefaultPorts are the agents' usual ports, for `themis dev`.
var DefaultPorts = Ports{
	ConsulHTTP: 8500, ConsulServer: 8300, ConsulSerfLAN: 8301, ConsulSerfWAN: 8302,
	NomadHTTP: 4646, NomadRPC: 4647, NomadSerf: 4648,
}

// Config describes a stack.
type Config struct {
	NomadBin, ConsulBin string
	// PluginDir holds themis-device and themis-driver.
	PluginDir string
	// Templates is the folder with nomad-dev.hcl.tmpl and consul-dev.hcl.tmpl
	// (and nomad-server.hcl.tmpl and nomad-client.hcl.tmpl, for
	// StartCluster).
	Templates string
	// Topology is the simulated topology file; NodeName its node, which is
	// also the Nomad node's name.
	Topology string
	NodeName string
	// Nodes, for StartCluster: one Nomad client per name, each that node
	// of the topology file and a Nomad node of that name. Empty: the one
	// client NodeName.
	Nodes []string
	// ServerOnly, for StartCluster: start the server alone, no client
	// agents (Nodes, NodeName, PluginDir and Topology are not needed), for
	// simulated nodes (e2e/nodesim) that join over its RPC port
	// (Cluster.NomadRPCAddr).
	ServerOnly bool
	// NoLeaseCheck, for StartCluster: the clients' themis driver starts
	// tasks without a lease, for a cluster that no planner runs.
	NoLeaseCheck bool
	// DataDir receives the rendered configs, agent data and logs; it is
	// created if missing.
	DataDir string
	Ports   Ports
	// ACL starts both agents with ACLs on (Consul default_policy deny),
	// bootstraps them with one management token, and loads the policies of
	// ACLPolicyDir (default: the acl folder beside Templates, examples/acl)
	// with a token each (Stack.Tokens); the themis driver gets the driver's
	// Consul token. StartConsul with ACL starts only the Consul side (its
	// management and Consul tokens); StartCluster with ACL then needs
	// those in ACLTokens, bootstraps its server's ACLs with the same
	// management secret, loads the Nomad policies and turns ACLs on in
	// every client (Cluster.Tokens).
	ACL          bool
	ACLPolicyDir string
	// ACLTokens, for StartCluster with ACL: the Stack.Tokens of the Consul
	// agent that StartConsul started with ACL.
	ACLTokens Tokens
	// Dockerd, when set, is the dockerd binary: Start runs a Docker daemon
	// of the stack's own (docker.go) and enables the dev agent's docker
	// driver on it (Stack.DockerHost); Start fails if it cannot run.
	// StartCluster does not use it.
	Dockerd string
	// AgentLogs, when set, also receives the agents' output.
	AgentLogs io.Writer
	Log       hclog.Logger
}

// Stack is a running set of agents.
type Stack struct {
	cfg    Config
	procs  []*exec.Cmd
	logs   []*os.File
	exited []chan error
	tokens Tokens
	// dockerSock is the socket of the stack's dockerd ("" without one).
	dockerSock string
	// cleanup runs after Stop stopped every agent.
	cleanup []func()
}

// ConsulAddr is the Consul HTTP address (host:port).
func (s *Stack) ConsulAddr() string { return "127.0.0.1:" + strconv.Itoa(s.cfg.Ports.ConsulHTTP) }

// NomadAddr is the Nomad HTTP address (URL).
func (s *Stack) NomadAddr() string { return "http://127.0.0.1:" + strconv.Itoa(s.cfg.Ports.NomadHTTP) }

// DataDir is the stack's data folder.
func (s *Stack) DataDir() string { return s.cfg.DataDir }

// Pids are the process ids of the stack's running agents, in the order
// they started.
func (s *Stack) Pids() []int {
	out := make([]int, 0, len(s.procs))
	for _, c := range s.procs {
		out = append(out, c.Process.Pid)
	}
	return out
}

// Start renders the configs, starts Consul, waits for its leader, starts
// Nomad, and waits until the Nomad node is ready with the themis driver
// healthy and its themis GPUs fingerprinted. On error everything started is
// stopped again.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	return start(ctx, cfg, true)
}

// StartConsul starts only the Consul dev agent (cfg needs ConsulBin,
// Templates and DataDir), for tests of the Consul adapter alone.
func StartConsul(ctx context.Context, cfg Config) (*Stack, error) {
	return start(ctx, cfg, false)
}

// start tries up to three times when an agent lost one of its ports to
// another socket before it bound it (ports.go): each try picks fresh ports
// for those cfg leaves zero. A Consul and a Nomad dev agent keep their state
// in memory, so nothing of a failed try is left to clash with the next.
func start(ctx context.Context, cfg Config, withNomad bool) (*Stack, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	for try := 1; ; try++ {
		s, err := startOnce(ctx, cfg, withNomad)
		if err == nil || !errors.Is(err, errPortInUse) || try == 3 {
			return s, err
		}
		cfg.Log.Warn("an agent lost a port before it bound it; starting again on fresh ports", "try", try, "error", err)
	}
}

func startOnce(ctx context.Context, cfg Config, withNomad bool) (*Stack, error) {
	if err := cfg.check(true, withNomad); err != nil {
		return nil, err
	}
	if err := cfg.Ports.fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if cfg.ACL {
		s.tokens.Management = newSecret()
	}
	consulCfg, err := s.render("consul-dev.hcl.tmpl", "consul.hcl", nil)
	if err != nil {
		return nil, err
	}
	if err := s.spawn("consul", cfg.ConsulBin, "agent", "-dev", "-config-file", consulCfg); err != nil {
		return nil, err
	}
	if err := s.waitFor(ctx, "Consul leader", 60*time.Second, s.consulReady); err != nil {
		return nil, err
	}
	if cfg.ACL {
		if err := s.consulACL(ctx); err != nil {
			return nil, err
		}
	}
	// A session (the planner's leader lock) needs the agent's node in the
	// catalog with its serfHealth check, which the leader adds a moment
	// after it is elected ("Missing check 'serfHealth' registration").
	if err := s.waitFor(ctx, "Consul's node with its serfHealth check", 60*time.Second, s.consulNodeChecked); err != nil {
		return nil, err
	}
	if withNomad {
		if err := prepareDirs(cfg.DataDir, filepath.Join(cfg.DataDir, "nomad")); err != nil {
			return nil, err
		}
		if cfg.Dockerd != "" {
			if err := s.startDocker(ctx); err != nil {
				return nil, fmt.Errorf("devstack: Docker daemon %s: %w", cfg.Dockerd, err)
			}
		}
		nomadCfg, err := s.render("nomad-dev.hcl.tmpl", "nomad.hcl", map[string]any{"DockerEndpoint": s.DockerHost()})
		if err != nil {
			return nil, err
		}
		// -dev with a config file: server + client in one process, in-memory
		// state.
		if err := s.spawn("nomad", cfg.NomadBin, "agent", "-dev", "-config", nomadCfg); err != nil {
			return nil, err
		}
		if cfg.ACL {
			if err := s.nomadACL(ctx); err != nil {
				return nil, err
			}
		}
		if err := s.waitFor(ctx, "Nomad node with themis GPUs and driver", 90*time.Second, s.nomadReady); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

func (c *Config) check(withConsul, withNomad bool) error {
	if c.DataDir == "" {
		return errors.New("devstack: data dir not set")
	}
	need := map[string]string{"templates": c.Templates}
	if withConsul {
		need["consul binary"] = c.ConsulBin
	}
	if withNomad {
		need["nomad binary"], need["plugin dir"], need["topology"] = c.NomadBin, c.PluginDir, c.Topology
	}
	for what, p := range need {
		if p == "" {
			return fmt.Errorf("devstack: %s not set", what)
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("devstack: %s: %w", what, err)
		}
	}
	if !withNomad {
		return nil
	}
	for _, bin := range []string{"themis-device", "themis-driver"} {
		if _, err := os.Stat(filepath.Join(c.PluginDir, bin)); err != nil {
			return fmt.Errorf("devstack: plugin %s missing from %s (run `make plugins`): %w", bin, c.PluginDir, err)
		}
	}
	if c.NodeName == "" && len(c.Nodes) == 0 {
		return errors.New("devstack: node name not set")
	}
	return nil
}

// render fills the template with the config's paths and ports, and extra
// (which wins), and writes it to out in the data dir.
func (s *Stack) render(tmpl, out string, extra map[string]any) (string, error) {
	src := filepath.Join(s.cfg.Templates, tmpl)
	t, err := template.ParseFiles(src)
	if err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	data := map[string]any{
		"NodeName": s.cfg.NodeName, "DataDir": absPath(s.cfg.DataDir), "PluginDir": absPath(s.cfg.PluginDir),
		"Topology":   absPath(s.cfg.Topology),
		"ConsulHTTP": s.cfg.Ports.ConsulHTTP, "ConsulServer": s.cfg.Ports.ConsulServer,
		"ConsulSerfLAN": s.cfg.Ports.ConsulSerfLAN, "ConsulSerfWAN": s.cfg.Ports.ConsulSerfWAN,
		"NomadHTTP": s.cfg.Ports.NomadHTTP, "NomadRPC": s.cfg.Ports.NomadRPC, "NomadSerf": s.cfg.Ports.NomadSerf,
		"NomadClientHTTP": s.cfg.Ports.NomadClientHTTP,
		"ACL":             s.cfg.ACL, "ManagementToken": s.tokens.Management, "DriverConsulToken": s.tokens.DriverConsul,
	}
	for k, v := range extra {
		data[k] = v
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("devstack: render %s: %w", src, err)
	}
	dst := filepath.Join(s.cfg.DataDir, out)
	return dst, writeSecret(dst, buf.Bytes())
}

func (s *Stack) spawn(name, bin string, args ...string) error {
	return s.spawnLog(os.O_TRUNC, name, bin, args...)
}

// spawnLog starts an agent whose output goes to <data dir>/<name>.log,
// opened with the extra flag (os.O_TRUNC or os.O_APPEND).
func (s *Stack) spawnLog(flag int, name, bin string, args ...string) error {
	logPath := filepath.Join(s.cfg.DataDir, name+".log")
	f, err := openPrivate(logPath, flag)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	var out io.Writer = f
	if s.cfg.AgentLogs != nil {
		out = io.MultiWriter(f, s.cfg.AgentLogs)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = withoutEnv(os.Environ(), "AWS_CA_BUNDLE", "NOMAD_ADDR", "CONSUL_HTTP_ADDR")
	// Own process group, so Stop reaches the plugins the agent started; and
	// die with us if we are killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("devstack: start %s: %w", name, err)
	}
	reap(cmd.Process.Pid, s.cfg.DataDir)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	s.procs = append(s.procs, cmd)
	s.logs = append(s.logs, f)
	s.exited = append(s.exited, done)
	s.cfg.Log.Info("started agent", "agent", name, "pid", cmd.Process.Pid, "log", logPath)
	return nil
}

// forget removes a running agent from the stack (which then no longer
// stops or watches it) and returns its exit channel and log file.
func (s *Stack) forget(cmd *exec.Cmd) (chan error, *os.File) {
	for i, c := range s.procs {
		if c == cmd {
			done, log := s.exited[i], s.logs[i]
			s.procs = append(s.procs[:i], s.procs[i+1:]...)
			s.exited = append(s.exited[:i], s.exited[i+1:]...)
			s.logs = append(s.logs[:i], s.logs[i+1:]...)
			return done, log
		}
	}
	return nil, nil
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func withoutEnv(env []string, keys ...string) []string {
	var out []string
outer:
	for _, kv := range env {
		for _, k := range keys {
			if len(kv) > len(k) && kv[:len(k)+1] == k+"=" {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}

func (s *Stack) waitFor(ctx context.Context, what string, timeout time.Duration, ready func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		for i, done := range s.exited {
			select {
			case err := <-done:
				done <- err
				tail := logTail(s.logs[i].Name(), 8)
				err = fmt.Errorf("devstack: %s exited while waiting for %s (%v); see %s; it ended with:\n%s",
					filepath.Base(s.procs[i].Path), what, err, s.logs[i].Name(), tail)
				if strings.Contains(tail, "address already in use") {
					err = fmt.Errorf("%w: %w", errPortInUse, err)
				}
				return err
			default:
			}
		}
		ok, err := ready(ctx)
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("devstack: timed out after %s waiting for %s (last error: %v); agent logs are in %s", timeout, what, last, s.cfg.DataDir)
}

// logTail is the last n lines of the log file at path, for an agent that
// exited: its reason is there.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	const most = 4096
	if fi, err := f.Stat(); err == nil && fi.Size() > most {
		_, _ = f.Seek(fi.Size()-most, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

func getJSON(ctx context.Context, url string, v any) error { return getJSONToken(ctx, url, "", v) }

// getJSONToken is getJSON with a Nomad ACL token (none: "").
func getJSONToken(ctx context.Context, url, token string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (s *Stack) consulReady(ctx context.Context) (bool, error) {
	var leader string
	if err := getJSON(ctx, "http://"+s.ConsulAddr()+"/v1/status/leader", &leader); err != nil {
		return false, err
	}
	return leader != "", nil
}

// consulNodeChecked reports whether the agent's node is in the catalog
// with its serfHealth check (with the management token under ACLs).
func (s *Stack) consulNodeChecked(ctx context.Context) (bool, error) {
	cfg := consulapi.DefaultConfig()
	cfg.Address, cfg.Token = s.ConsulAddr(), s.tokens.Management
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		return false, err
	}
	name, err := c.Agent().NodeName()
	if err != nil {
		return false, err
	}
	checks, _, err := c.Health().Node(name, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return false, err
	}
	for _, ch := range checks {
		if ch.CheckID == "serfHealth" {
			return true, nil
		}
	}
	return false, nil
}

func (s *Stack) nomadReady(ctx context.Context) (bool, error) {
	ok, err := s.nodesReady(ctx, nil)
	if !ok || s.dockerSock == "" {
		return ok, err
	}
	var nodes []nomadNode
	if err := getJSONToken(ctx, s.NomadAddr()+"/v1/nodes", s.tokens.Management, &nodes); err != nil {
		return false, err
	}
	for _, n := range nodes {
		if d, ok := n.Drivers["docker"]; ok && d.Healthy {
			return true, nil
		}
	}
	return false, errors.New("the docker driver is not healthy yet")
}

// nodesReady: every named Nomad node (with no names: any one node) is ready,
// with the themis driver healthy and its themis GPUs fingerprinted.
func (s *Stack) nodesReady(ctx context.Context, names []string) (bool, error) {
	var nodes []nomadNode
	if err := getJSONToken(ctx, s.NomadAddr()+"/v1/nodes?resources=true", s.tokens.Management, &nodes); err != nil {
		return false, err
	}
	if len(names) == 0 {
		var last error = errors.New("no ready Nomad node yet")
		for _, n := range nodes {
			if last = n.themisReady(); last == nil {
				return true, nil
			}
		}
		return false, last
	}
	for _, name := range names {
		err := fmt.Errorf("node %s has not registered yet", name)
		for _, n := range nodes {
			if n.Name == name {
				if err = n.themisReady(); err == nil {
					break
				}
			}
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

type nomadNode struct {
	Name          string
	Status        string
	Drivers       map[string]struct{ Healthy, Detected bool }
	NodeResources *struct {
		Devices []struct {
			Vendor, Type string
			Instances    []struct{ ID string }
		}
	}
}

func (n nomadNode) themisReady() error {
	if n.Status != "ready" {
		return fmt.Errorf("node %s is %s", n.Name, n.Status)
	}
	if d, ok := n.Drivers["themis"]; !ok || !d.Healthy {
		return fmt.Errorf("node %s: themis driver not healthy yet", n.Name)
	}
	if n.NodeResources != nil {
		for _, d := range n.NodeResources.Devices {
			if d.Vendor == "themis" && d.Type == "gpu" && len(d.Instances) > 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("node %s: no themis GPUs fingerprinted yet", n.Name)
}

// Stop stops Nomad, then Consul: SIGINT first (Nomad's dev client then stops
// its tasks), SIGKILL to the process group after a grace period.
func (s *Stack) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		cmd, done := s.procs[i], s.exited[i]
		pgid := cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			s.cfg.Log.Warn("agent did not stop in 20s; killing it", "agent", filepath.Base(cmd.Path))
		}
		// Whatever is left in the agent's process group (plugins) goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		unreap(pgid)
		s.logs[i].Close()
	}
	s.procs, s.logs, s.exited = nil, nil, nil
	for _, f := range s.cleanup {
		f()
	}
	s.cleanup = nil
}
