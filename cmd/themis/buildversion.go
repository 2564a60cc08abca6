package main

import (
	"runtime/debug"
	"strings"
)

// versionString is the build's one version line, which themis version,
// themis --version and the planner's API (/v1/planner) all give:
// "themis-nomad v0.1.0 (3f2a9c1e7b4d+dirty, go1.24.4)", the commit where
// the build knows it (a go build in the repository), else the Go version
// alone.
func versionString() string {
	return formatVersion(Version, buildInfo())
}

func buildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

func formatVersion(release string, bi *debug.BuildInfo) string {
	out := "themis-nomad v" + release
	if bi == nil {
		return out
	}
	var parts []string
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		rev = rev[:min(12, len(rev))]
		if dirty {
			rev += "+dirty"
		}
		parts = append(parts, rev)
	}
	if bi.GoVersion != "" {
		parts = append(parts, bi.GoVersion)
	}
	if len(parts) == 0 {
		return out
	}
	return out + " (" + strings.Join(parts, ", ") + ")"
}
