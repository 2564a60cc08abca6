package trace

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedTrace returns the path of a file in the shared traces folder, which
// sits beside the repository (../shared in CI, /work/shared here): it walks
// up from the test's working directory. The test is skipped when the folder
// or the file is missing.
func sharedTrace(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "traces", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skipf("shared/traces/%s not found beside the repository (walked up from the test's directory); skipping", name)
		}
		dir = parent
	}
}
