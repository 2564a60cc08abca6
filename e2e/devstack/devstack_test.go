package devstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRender renders every agent config template as Start and StartCluster
// render it: each field a template names must be known (a missing one would
// render as "<no value>"), and each client of a cluster must be its own node
// with its own data dir, port and cgroup parent, pointing at the server,
// checking leases, sharing one checkpoint root.
func TestRender(t *testing.T) {
	templates, err := filepath.Abs(filepath.Join("..", "..", "examples", "agents"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Cluster{s: &Stack{cfg: Config{
		Templates: templates, DataDir: dir, PluginDir: "/plugins", Topology: "/topology.hcl",
		Nodes: []string{"node-0", "node-1"},
		Ports: Ports{ConsulHTTP: 1001, ConsulServer: 1002, ConsulSerfLAN: 1003, ConsulSerfWAN: 1004,
			NomadHTTP: 1005, NomadRPC: 1006, NomadSerf: 1007},
	}}, clients: []*client{{node: "node-0", port: 1008}, {node: "node-1", port: 1009}}}
	names, err := filepath.Glob(filepath.Join(templates, "*.hcl.tmpl"))
	if err != nil || len(names) < 4 {
		t.Fatalf("templates in %s: %v %v", templates, names, err)
	}
	render := func(tmpl, out string, extra map[string]any) string {
		t.Helper()
		dst, err := c.s.render(tmpl, out, extra)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "<no value>") {
			t.Errorf("%s names a field the config does not have:\n%s", tmpl, b)
		}
		return string(b)
	}
	for _, name := range names {
		switch base := filepath.Base(name); base {
		case "nomad-dev.hcl.tmpl", "consul-dev.hcl.tmpl":
			c.s.cfg.NodeName = "n1"
			render(base, strings.TrimSuffix(base, ".tmpl"), nil)
		case "nomad-server.hcl.tmpl", "nomad-client.hcl.tmpl":
		default:
			t.Errorf("%s: a template this test does not render", base)
		}
	}
	server := render("nomad-server.hcl.tmpl", "nomad-server.hcl", map[string]any{"ServerName": "themis-server"})
	for _, want := range []string{`name       = "themis-server"`, "bootstrap_expect = 1", "http = 1005", "rpc  = 1006", "serf = 1007", "server_auto_join = false"} {
		if !strings.Contains(server, want) {
			t.Errorf("nomad-server.hcl lacks %q:\n%s", want, server)
		}
	}
	if strings.Contains(server, `plugin "`) || strings.Contains(server, "client {") {
		t.Errorf("nomad-server.hcl runs a client or plugins:\n%s", server)
	}
	parents := map[string]bool{}
	for i, cl := range c.clients {
		data := c.clientData(cl)
		out := render("nomad-client.hcl.tmpl", "nomad-client-"+cl.node+".hcl", data)
		for _, want := range []string{
			`name       = "` + cl.node + `"`, `data_dir   = "` + filepath.Join(dir, "client-"+cl.node) + `"`,
			`node               = "` + cl.node + `"`, fmt.Sprintf("http = %d", 1008+i),
			`servers = ["127.0.0.1:1006"]`, `address          = "127.0.0.1:1001"`,
			"lease_check     = true", `checkpoint_root = "` + dir + `/checkpoints"`, `max_kill_timeout = "30m"`,
			`cgroup_parent    = "` + data["CgroupParent"].(string) + `"`,
			`alloc_mounts_dir = "` + filepath.Join(dir, "client-"+cl.node, "alloc_mounts") + `"`,
			`checkpoint_root    = "` + dir + `/checkpoints"`, // the device plugin's checkpoint mounts
		} {
			if !strings.Contains(out, want) {
				t.Errorf("client %s: config lacks %q:\n%s", cl.node, want, out)
			}
		}
		// Tasks run as dynamic uids; no job gets the whole checkpoint root.
		for _, unsafe := range []string{"default_user", "allow_root_jobs", `host_volume "themis-checkpoints"`} {
			if strings.Contains(out, unsafe) {
				t.Errorf("client %s: config sets %s:\n%s", cl.node, unsafe, out)
			}
		}
		parents[data["CgroupParent"].(string)] = true
	}
	if len(parents) != len(c.clients) {
		t.Errorf("clients share a cgroup parent: %v", parents)
	}
	c.s.cfg.NoLeaseCheck = true
	if out := render("nomad-client.hcl.tmpl", "x.hcl", c.clientData(c.clients[0])); !strings.Contains(out, "lease_check     = false") {
		t.Errorf("NoLeaseCheck: config lacks lease_check = false:\n%s", out)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b/secrets`: "/tmp/a b/secrets",
		`/plain`:              "/plain",
		`/tab\011x`:           "/tab\tx",
		`/short\04`:           `/short\04`,
		`/end\`:               `/end\`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRenderACL: with Config.ACL the dev templates, and the cluster's
// server and client templates, turn ACLs on with the management token and
// give the driver its Consul token; without, they render no acl block and
// no token (the non-ACL path as before).
func TestRenderACL(t *testing.T) {
	templates, err := filepath.Abs(filepath.Join("..", "..", "examples", "agents"))
	if err != nil {
		t.Fatal(err)
	}
	for _, acl := range []bool{false, true} {
		s := &Stack{cfg: Config{Templates: templates, DataDir: t.TempDir(), PluginDir: "/plugins", Topology: "/t.hcl",
			NodeName: "n1", ACL: acl, Ports: Ports{ConsulHTTP: 1001, NomadHTTP: 1005}}}
		if acl {
			s.tokens = Tokens{Management: "mgmt-secret", DriverConsul: "driver-secret"}
		}
		read := func(tmpl string) string {
			dst, err := s.render(tmpl, strings.TrimSuffix(tmpl, ".tmpl"), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		consul, nomad := read("consul-dev.hcl.tmpl"), read("nomad-dev.hcl.tmpl")
		c := &Cluster{s: s}
		server := read("nomad-server.hcl.tmpl")
		cl, err := s.render("nomad-client.hcl.tmpl", "nomad-client.hcl", c.clientData(&client{node: "node-0", port: 1008}))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(cl)
		if err != nil {
			t.Fatal(err)
		}
		checks := map[string][]string{
			consul:    {"acl {", `default_policy = "deny"`, `initial_management = "mgmt-secret"`},
			nomad:     {"acl {", `token   = "mgmt-secret"`, `consul_token    = "driver-secret"`},
			server:    {"acl {\n  enabled = true\n}", `token            = "mgmt-secret"`},
			string(b): {"acl {\n  enabled = true\n}", `token            = "mgmt-secret"`, `consul_token    = "driver-secret"`},
		}
		for out, wants := range checks {
			for _, want := range wants {
				if got := strings.Contains(out, want); got != acl {
					t.Errorf("ACL %v: config has %q: %v, want %v:\n%s", acl, want, got, acl, out)
				}
			}
		}
	}
}

// TestRenderDocker: with a Docker daemon (Config.Dockerd) the dev agent's
// config enables the docker driver on the stack's own socket, with runc as
// the runtime for tasks given simulated GPUs and no image GC; without one
// it has no docker block (Nomad's default: the system socket, if any).
func TestRenderDocker(t *testing.T) {
	templates, err := filepath.Abs(filepath.Join("..", "..", "examples", "agents"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{cfg: Config{Templates: templates, DataDir: t.TempDir(), PluginDir: "/plugins", Topology: "/t.hcl", NodeName: "n1"}}
	for _, c := range []struct {
		name, endpoint string
		want, not      []string
	}{
		{"with dockerd", "unix:///tmp/themis-dockerd-1/docker.sock",
			[]string{`plugin "docker"`, `endpoint = "unix:///tmp/themis-dockerd-1/docker.sock"`, `nvidia_runtime = "runc"`, "image = false"}, nil},
		{"without", "", nil, []string{`plugin "docker"`, "nvidia_runtime"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst, err := s.render("nomad-dev.hcl.tmpl", "nomad.hcl", map[string]any{"DockerEndpoint": c.endpoint})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("lacks %q:\n%s", w, b)
				}
			}
			for _, w := range c.not {
				if strings.Contains(string(b), w) {
					t.Errorf("has %q:\n%s", w, b)
				}
			}
		})
	}
}
