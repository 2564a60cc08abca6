// Package browser runs Debian's Chromium headless for the tests that look
// at a page as a user would: the planner's dashboard and a lease key in
// Consul's UI. It finds the browser (skipping the test where none is
// installed, or failing it where THEMIS_REQUIRE_BROWSER is set, as in CI),
// renders a page to its DOM after its scripts ran, and takes screenshots.
package browser

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// RequireEnv makes a missing browser a failure instead of a skip (.ci/run
// sets it).
const RequireEnv = "THEMIS_REQUIRE_BROWSER"

// Browser is a headless Chromium.
type Browser struct {
	bin string
	tmp string
}

// Find returns Chromium, or skips the test (fails it under RequireEnv)
// where none is installed.
func Find(t testing.TB) *Browser {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return &Browser{bin: p, tmp: t.TempDir()}
		}
	}
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("no chromium on PATH, and %s is set (apt-get install chromium; make browser)", RequireEnv)
	}
	t.Skipf("no chromium on PATH (apt-get install chromium, or make browser; %s=1 makes this a failure)", RequireEnv)
	return nil
}

// args are the flags of every run: headless, no sandbox (root in CI), no
// GPU, nothing from the network but the page, a fresh profile.
func (b *Browser) args(budget time.Duration, extra ...string) []string {
	profile, _ := os.MkdirTemp(b.tmp, "profile-")
	return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--hide-scrollbars", "--user-data-dir=" + profile, fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds())}, extra...)
}

func (b *Browser) run(ctx context.Context, args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+b.tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("chromium %s: %w\n%s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return out, nil
}

// DOM renders url, lets its scripts run for budget (virtual time: timers
// run at once) and returns the document.
func (b *Browser) DOM(ctx context.Context, url string, budget time.Duration) (string, error) {
	out, err := b.run(ctx, append(b.args(budget), "--window-size=1280,1000", "--dump-dom", url))
	return string(out), err
}

// Screenshot renders url like DOM and writes a PNG of width x height.
func (b *Browser) Screenshot(ctx context.Context, url string, budget time.Duration, file string, width, height int) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	_, err = b.run(ctx, append(b.args(budget), fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+abs, url))
	if err != nil {
		return err
	}
	if st, err := os.Stat(abs); err != nil || st.Size() == 0 {
		return fmt.Errorf("chromium wrote no screenshot to %s: %v", abs, err)
	}
	return nil
}

var tags = regexp.MustCompile(`<[^>]*>`)

// Text is a fragment of HTML without its tags, entities decoded.
func Text(fragment string) string { return html.UnescapeString(tags.ReplaceAllString(fragment, "")) }

var codeLine = regexp.MustCompile(`(?s)<pre class="[^"]*CodeMirror-line[^"]*"[^>]*>(.*?)</pre>`)

// EditorLines are the lines of the code editors (CodeMirror) on a page,
// as text: what Consul's UI shows of a key's value, line by line.
func EditorLines(dom string) []string {
	var out []string
	for _, m := range codeLine.FindAllStringSubmatch(dom, -1) {
		out = append(out, strings.TrimRight(strings.ReplaceAll(Text(m[1]), "\u200b", ""), " "))
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
