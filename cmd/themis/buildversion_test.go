package main

import (
	"io"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// The version line names the release, the commit (12 digits, +dirty for
// uncommitted changes) and the Go version, as far as the build knows them.
func TestFormatVersion(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.24.4", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{nil, "themis-nomad v0.1.0"},
		{&debug.BuildInfo{}, "themis-nomad v0.1.0"},
		{&debug.BuildInfo{GoVersion: "go1.24.4"}, "themis-nomad v0.1.0 (go1.24.4)"},
		{vcs("3f2a9c1e7b4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b", "false"), "themis-nomad v0.1.0 (3f2a9c1e7b4d, go1.24.4)"},
		{vcs("3f2a9c1e7b4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b", "true"), "themis-nomad v0.1.0 (3f2a9c1e7b4d+dirty, go1.24.4)"},
	} {
		if got := formatVersion("0.1.0", tc.bi); got != tc.want {
			t.Errorf("formatVersion(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}

// themis version and themis --version print the same line, on stdout.
func TestVersionAndDashVersionAgree(t *testing.T) {
	capture := func(args ...string) string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = w
		code := run(args)
		os.Stdout = stdout
		w.Close()
		b, _ := io.ReadAll(r)
		if code != 0 {
			t.Fatalf("themis %s: exit %d", strings.Join(args, " "), code)
		}
		return string(b)
	}
	want := versionString() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		if got := capture(args...); got != want {
			t.Errorf("themis %s printed %q, want %q", strings.Join(args, " "), got, want)
		}
	}
}
