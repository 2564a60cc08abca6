package driver

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// progressAfter is the tail of a progress attack's script: once the bad
// file has had its chance, the workload reports honestly, so the test sees
// that the driver set the bad file aside and kept reporting.
const progressAfter = `sleep 1.5; rm -f "$THEMIS_PROGRESS_FILE"
echo '{"iteration": 7}' > "$THEMIS_PROGRESS_FILE.tmp"; mv "$THEMIS_PROGRESS_FILE.tmp" "$THEMIS_PROGRESS_FILE"
exec sleep 60`

// waitProgress waits until a progress record with iteration it arrives.
func waitProgress(t *testing.T, leases *fakeLeases, it int64, within time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, r := range leases.progress() {
			if r.Iteration == it {
				return true
			}
		}
	}
	return false
}

// TestProgressFileSparse: a progress file of 1 GiB (a sparse file, in
// place or through a symlink) is not read: the driver reads at most its
// size cap, and the task's honest report afterwards is published. Before:
// os.ReadFile as root read all of it, each report period (a 100 GB one
// ran the client's plugin out of memory).
func TestProgressFileSparse(t *testing.T) {
	cases := []struct{ name, plant string }{
		{"in place", `truncate -s 1G "$THEMIS_PROGRESS_FILE"`},
		{"symlink", `truncate -s 1G "$THEMIS_CHECKPOINT_DIR/big"; ln -s "$THEMIS_CHECKPOINT_DIR/big" "$THEMIS_PROGRESS_FILE"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			leases := &fakeLeases{}
			e := prodEnv(t, leases, nil, WithCheckpointReportPeriod(50*time.Millisecond))
			task, tc := jobTask("sparse-job", "sparse", c.plant+`; echo > "$THEMIS_CHECKPOINT_DIR/ready"; `+progressAfter)
			_, err := e.start(t, task, tc, false)
			must.NoError(t, err)
			waitFile(t, filepath.Join(e.ckptDirOf(task), "ready"), 10*time.Second)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			honest := waitProgress(t, leases, 7, 10*time.Second)
			runtime.ReadMemStats(&after)
			read := after.TotalAlloc - before.TotalAlloc
			must.Less(t, uint64(128<<20), read, must.Sprintf("the test process allocated %d MiB while the task's progress file was 1 GiB", read>>20))
			must.True(t, honest, must.Sprint("the honest report after the bad file was not published"))
		})
	}
}

// TestProgressFileFIFO: a progress file that is a FIFO does not hang the
// task's reporting: it is set aside, and the honest report that replaces
// it is published. Before: the open blocked for good (no writer), and the
// task reported nothing more.
func TestProgressFileFIFO(t *testing.T) {
	leases := &fakeLeases{}
	e := prodEnv(t, leases, nil, WithCheckpointReportPeriod(50*time.Millisecond))
	task, tc := jobTask("fifo-job", "fifo", fmt.Sprintf(`mkfifo "$THEMIS_PROGRESS_FILE"; echo > "$THEMIS_CHECKPOINT_DIR/ready"; %s`, progressAfter))
	_, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	waitFile(t, filepath.Join(e.ckptDirOf(task), "ready"), 10*time.Second)
	must.True(t, waitProgress(t, leases, 7, 8*time.Second),
		must.Sprint("no progress published after the task's progress file was a FIFO: the reporter hangs"))
}
