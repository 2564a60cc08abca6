package devstack

import (
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// The agents run in process groups of their own (so that Stop reaches the
// plugins they start) and die with this process (Pdeathsig). Their own
// children do not: a Nomad agent killed outright leaves its plugins (the
// themis-device plugin, `nomad logmon`, the themis driver) running,
// re-parented to init. So that a `themis dev` (or a test binary) killed
// with SIGKILL leaves nothing behind, the first agent started also starts a
// reaper: a shell in a process group of its own that reads the agents'
// process group IDs on its stdin and, when its stdin closes (this process
// is gone, however it ended, as the kernel closes the pipe), kills those
// groups. A clean Stop has killed them already; the reaper's kill then
// finds nothing.

// reaperScript collects process group IDs ("+pgid"; "-pgid" forgets one,
// stopped cleanly) until EOF, then kills the groups it still has.
const reaperScript = `trap '' INT TERM HUP
groups=" "
while read -r l; do
  case $l in
  +*) groups="$groups${l#+} " ;;
  -*) groups=$(printf '%s' "$groups" | sed "s/ ${l#-} / /g") ;;
  esac
done
for g in $groups; do kill -9 "-$g" 2>/dev/null; done
exit 0`

var reaper struct {
	once sync.Once
	mu   sync.Mutex
	w    io.WriteCloser // nil if the reaper could not start
	pid  int
}

// reap registers an agent's process group with the reaper (started on
// first use). It is best effort: without /bin/sh nothing is registered.
func reap(pgid int) {
	reaper.once.Do(func() {
		cmd := exec.Command("/bin/sh", "-c", reaperScript)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		w, err := cmd.StdinPipe()
		if err != nil {
			return
		}
		if err := cmd.Start(); err != nil {
			return
		}
		// Not waited for while we run: it exits when we do. Its stdin's
		// write end must not leak into the agents we start (exec.Cmd
		// opens it close-on-exec).
		reaper.w, reaper.pid = w, cmd.Process.Pid
		go func() { _ = cmd.Wait() }()
	})
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.w != nil {
		_, _ = fmt.Fprintln(reaper.w, "+"+strconv.Itoa(pgid))
	}
}

// unreap tells the reaper a group was stopped (so that a later process
// reusing its ID is not killed).
func unreap(pgid int) {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.w != nil {
		_, _ = fmt.Fprintln(reaper.w, "-"+strconv.Itoa(pgid))
	}
}

// ReaperPid is the reaper's process ID (0 if none was started), for tests.
func ReaperPid() int {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	return reaper.pid
}
