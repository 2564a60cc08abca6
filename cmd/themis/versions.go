package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
)

// The Nomad and Consul versions the suite runs against (e2e/agents/build.sh
// pins them; TestTestedVersionsMatchTheBuildPins keeps the two together).
// docs/guide.md's "Supported versions" says the same.
var (
	testedNomad  = []string{"1.11.3"}
	testedConsul = []string{"1.22.0"}
)

// serverVersion is one server agent and the version it reports.
type serverVersion struct {
	Name, Version string
}

// untestedServers returns a line for each server whose version is not in
// tested, sorted by name; a version is compared without its build suffix
// ("1.11.3+ent" and "1.22.0:abc" count as 1.11.3 and 1.22.0).
func untestedServers(product string, tested []string, servers []serverVersion) []string {
	var out []string
	for _, s := range servers {
		if !slices.Contains(tested, bareVersion(s.Version)) {
			out = append(out, fmt.Sprintf("%s server %s runs %s (tested: %s)",
				product, s.Name, orUnknown(s.Version), strings.Join(tested, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

// bareVersion cuts a version down to its release: "v1.11.3+ent" -> "1.11.3",
// "1.22.0:8d2cb0b4" -> "1.22.0", "1.11.3-dev" stays "1.11.3-dev" (a
// pre-release is not the release).
func bareVersion(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "+:"); i >= 0 {
		v = v[:i]
	}
	return v
}

func orUnknown(v string) string {
	if v == "" {
		return "an unknown version"
	}
	return v
}

// nomadServers reads the Nomad servers' versions from their gossip tags
// (GET /v1/agent/members, node:read).
func nomadServers(nc *nomadapi.Client) ([]serverVersion, error) {
	m, err := nc.Agent().Members()
	if err != nil {
		return nil, err
	}
	var out []serverVersion
	for _, s := range m.Members {
		if s.Status != "alive" {
			continue
		}
		out = append(out, serverVersion{Name: s.Name, Version: s.Tags["build"]})
	}
	return out, nil
}

// consulServers reads the Consul servers' versions from their LAN gossip
// tags (GET /v1/agent/members, node:read on them).
func consulServers(cc *consulapi.Client) ([]serverVersion, error) {
	m, err := cc.Agent().Members(false)
	if err != nil {
		return nil, err
	}
	var out []serverVersion
	for _, s := range m {
		if s.Tags["role"] != "consul" || s.Status != 1 { // 1: serf's StatusAlive
			continue
		}
		out = append(out, serverVersion{Name: s.Name, Version: s.Tags["build"]})
	}
	return out, nil
}

// warnUntestedVersions logs one warning per Nomad or Consul server that runs
// a version the suite has not run against. It never stops the planner: an
// untested version may well work, and an operator mid-upgrade runs two.
// A token that may not read the members is logged and passed over.
func warnUntestedVersions(nc *nomadapi.Client, cc *consulapi.Client, log hclog.Logger) {
	check := func(product string, tested []string, read func() ([]serverVersion, error)) {
		servers, err := read()
		if err != nil {
			log.Info("cannot read the servers' versions", "product", product, "error", err)
			return
		}
		seen := make([]string, 0, len(servers))
		for _, s := range servers {
			seen = append(seen, s.Name+"="+orUnknown(s.Version))
		}
		log.Info("servers' versions", "product", product, "servers", strings.Join(seen, " "))
		for _, w := range untestedServers(product, tested, servers) {
			log.Warn("untested version: " + w + "; see docs/guide.md, Supported versions")
		}
	}
	check("Nomad", testedNomad, func() ([]serverVersion, error) { return nomadServers(nc) })
	check("Consul", testedConsul, func() ([]serverVersion, error) { return consulServers(cc) })
}
