package devstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRender renders every agent config template with a full config: each
// field a template names must be known (a missing one would render as
// "<no value>"), and the Nomad cluster's client must point at its server.
func TestRender(t *testing.T) {
	templates, err := filepath.Abs(filepath.Join("..", "..", "examples", "agents"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{cfg: Config{
		Templates: templates, DataDir: t.TempDir(), PluginDir: "/plugins", Topology: "/topology.hcl", NodeName: "n1",
		Ports: Ports{ConsulHTTP: 1001, ConsulServer: 1002, ConsulSerfLAN: 1003, ConsulSerfWAN: 1004,
			NomadHTTP: 1005, NomadRPC: 1006, NomadSerf: 1007, NomadClientHTTP: 1008},
	}}
	names, err := filepath.Glob(filepath.Join(templates, "*.hcl.tmpl"))
	if err != nil || len(names) < 4 {
		t.Fatalf("templates in %s: %v %v", templates, names, err)
	}
	out := map[string]string{}
	for _, name := range names {
		base := filepath.Base(name)
		dst, err := s.render(base, strings.TrimSuffix(base, ".tmpl"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "<no value>") {
			t.Errorf("%s names a field the config does not have:\n%s", base, b)
		}
		out[base] = string(b)
	}
	client, server := out["nomad-client.hcl.tmpl"], out["nomad-server.hcl.tmpl"]
	for _, want := range []string{`servers = ["127.0.0.1:1006"]`, "http = 1008", "lease_check     = false", `address          = "127.0.0.1:1001"`} {
		if !strings.Contains(client, want) {
			t.Errorf("nomad-client.hcl lacks %q:\n%s", want, client)
		}
	}
	for _, want := range []string{"bootstrap_expect = 1", "http = 1005", "rpc  = 1006", "serf = 1007", "server_auto_join = false"} {
		if !strings.Contains(server, want) {
			t.Errorf("nomad-server.hcl lacks %q:\n%s", want, server)
		}
	}
	if strings.Contains(server, `plugin "`) || strings.Contains(server, "client {") {
		t.Errorf("nomad-server.hcl runs a client or plugins:\n%s", server)
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
