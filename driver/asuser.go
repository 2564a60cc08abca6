package driver

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// asUser runs fn with the file-system identity of who on the calling
// thread (setfsuid, setfsgid and setgroups are per thread in Linux, and
// the goroutine is locked to it): the kernel checks what fn opens,
// creates and removes as it would the task's own calls, so a path or a
// hard link the task planted cannot give the driver root's reach. The
// driver's other threads stay root. A thread whose identity cannot be put
// back is left locked, and Go ends it with the goroutine.
//
// The driver reads and writes a task's checkpoint dir this way (the
// notice and progress files, pruning, the newest checkpoint), besides
// opening each path without following symlinks (nofollow). A driver not
// running as root, or a root task, needs no switch.
func asUser(who taskUser, fn func() error) error {
	if os.Geteuid() != 0 || who.self || who.uid == 0 {
		return fn()
	}
	runtime.LockOSThread()
	saved, err := unix.Getgroups()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("as uid %d: getgroups: %w", who.uid, err)
	}
	// From here on, each step is undone in reverse order.
	if err := unix.Setgroups(append([]int{who.gid}, who.groups...)); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("as uid %d: setgroups: %w", who.uid, err)
	}
	prevGID, _ := unix.SetfsgidRetGid(who.gid)
	prevUID, _ := unix.SetfsuidRetUid(who.uid)
	if cur, _ := unix.SetfsuidRetUid(-1); cur != who.uid {
		restoreIdentity(prevUID, prevGID, saved)
		return fmt.Errorf("as uid %d: setfsuid did not take (fsuid %d)", who.uid, cur)
	}
	defer restoreIdentity(prevUID, prevGID, saved)
	return fn()
}

// restoreIdentity puts the thread's file-system identity back and unlocks
// it, or leaves it locked (to die with its goroutine) when it cannot.
func restoreIdentity(uid, gid int, groups []int) {
	_, _ = unix.SetfsuidRetUid(uid)
	_, _ = unix.SetfsgidRetGid(gid)
	gerr := unix.Setgroups(groups)
	cur, _ := unix.SetfsuidRetUid(-1)
	curGID, _ := unix.SetfsgidRetGid(-1)
	if gerr == nil && cur == uid && curGID == gid {
		runtime.UnlockOSThread()
	}
}
