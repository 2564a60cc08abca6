package devstack

import (
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
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
// stopped cleanly) and data dirs ("d<dir>") until EOF. Then it kills the
// sessions of the task executors of those data dirs (a process with an
// argument "executor" followed by one naming a path in the dir: Nomad's and the
// themis driver's executors, each the leader of a session with its task),
// then the groups it still has, and unmounts what is mounted under the
// data dirs.
const reaperScript = `trap '' INT TERM HUP
groups=" "
dirs=""
while read -r l; do
  case $l in
  +*) groups="$groups${l#+} " ;;
  -*) groups=$(printf '%s' "$groups" | sed "s/ ${l#-} / /g") ;;
  d*) dirs="$dirs
${l#d}" ;;
  esac
done
if [ -n "$dirs" ]; then
  for p in /proc/[0-9]*; do
    args=$(tr '\0' '\n' < "$p/cmdline" 2>/dev/null) || continue
    case "$args" in *"
executor
"*) ;; *) continue ;; esac
    after=${args#*"
executor
"}
    printf '%s\n' "$dirs" | while IFS= read -r d; do
      [ -n "$d" ] || continue
      case "$after" in *"$d/"*) echo "${p#/proc/}" ;; esac
    done
  done | sort -u | while read -r sid; do
    kill -9 "$sid" $(ps -eo pid=,sid= | awk -v s="$sid" '$2 == s { print $1 }') 2>/dev/null
  done
fi
for g in $groups; do kill -9 "-$g" 2>/dev/null; done
# What the clients mounted under the data dirs (tasks' secrets tmpfs),
# deepest first, so that the dirs can be removed.
printf '%s\n' "$dirs" | while IFS= read -r d; do
  [ -n "$d" ] || continue
  awk -v d="$d/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null
  done
done
exit 0`

var reaper struct {
	once sync.Once
	mu   sync.Mutex
	w    io.WriteCloser // nil if the reaper could not start
	pid  int
}

// reap registers an agent's process group and its data dir with the
// reaper (started on first use). It is best effort: without /bin/sh
// nothing is registered.
func reap(pgid int, dataDir string) {
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
		if dataDir != "" && !strings.ContainsAny(dataDir, "\n") {
			_, _ = fmt.Fprintln(reaper.w, "d"+absPath(dataDir))
		}
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
