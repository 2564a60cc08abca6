package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/shoenig/test/must"
)

// TestExampleGPUClientConfig: the themis driver's block of the example GPU
// client config (examples/agents/nomad-client-gpu.hcl) decodes against
// the plugin's schema, validates, and is the safe one: lease checks on,
// dynamic uids (no default_user), no root, no user a task may pick, no
// supplementary group, a checkpoint root not under the temp dir, the same
// root as the device plugin's checkpoint mounts; docker with no privileged
// containers, no volumes and runc and the NVIDIA runtime only.
func TestExampleGPUClientConfig(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleDir, "..", "examples", "agents", "nomad-client-gpu.hcl"))
	must.NoError(t, err)
	file, diags := hclsyntax.ParseConfig(src, "nomad-client-gpu.hcl", hcl.InitialPos)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	config := func(plugin string) string {
		for _, b := range file.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "plugin" && len(b.Labels) == 1 && b.Labels[0] == plugin {
				for _, c := range b.Body.Blocks {
					if c.Type == "config" {
						r := c.Range()
						return string(src[r.Start.Byte:r.End.Byte])
					}
				}
			}
		}
		t.Fatalf("no plugin %q { config { ... } } block", plugin)
		return ""
	}
	var pc *Config
	hclutils.NewConfigParser(configSpec()).ParseHCL(t, config("themis-driver"), &pc)
	cfg := pc.withDefaults()
	must.NoError(t, cfg.validate())
	must.True(t, cfg.LeaseCheck)
	must.Eq(t, "", cfg.DefaultUser)
	must.SliceEmpty(t, cfg.AllowRootJobs)
	must.SliceEmpty(t, cfg.AllowedUsers)
	must.SliceEmpty(t, cfg.SupplementaryGroups)
	must.Eq(t, DefaultCheckpointRoot, cfg.CheckpointRoot)
	must.StrNotHasPrefix(t, os.TempDir(), cfg.CheckpointRoot)
	must.StrContains(t, config("themis-device"), `checkpoint_root = "`+cfg.CheckpointRoot+`"`)
	must.True(t, strings.Contains(string(src), `enabled = false`), must.Sprint("raw_exec is off"))
	docker := config("docker")
	for _, want := range []string{"allow_privileged = false", `allow_runtimes   = ["runc", "nvidia"]`, "volumes {\n      enabled = false"} {
		must.StrContains(t, docker, want, must.Sprint("the docker plugin's safe values"))
	}
}
