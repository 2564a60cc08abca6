package driver

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// A gang's ranks above 0 run as the uid rank 0 published in the gang's
// rendezvous (gang.go). The rendezvous is in Consul, where every node's
// driver token may write, so the uid it names is checked against the
// claim in the checkpoint root before a rank joins it: only a uid some
// allocation of the same job holds (rank 0's) is joined, never one
// another job's allocation holds (whose checkpoints and processes the rank
// would then reach), nor one no allocation holds.

// checkJoinable fails unless every holder of uid in uids is a task of h's
// job (the same namespace and job: the first two names of the checkpoint
// dir), and there is at least one.
func checkJoinable(uids *nofollow.Dir, uid int, h holder) error {
	d, _, err := uids.Sub(strconv.Itoa(uid), 0)
	if err != nil {
		return fmt.Errorf("dynamic uid %d: its claim is gone: %w", uid, err)
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		return fmt.Errorf("dynamic uid %d: %w", uid, err)
	}
	if len(h.Dir) < 2 {
		return fmt.Errorf("dynamic uid %d: the joining task names no job", uid)
	}
	held := 0
	for _, n := range names {
		hh, err := readHolder(d, n)
		if err != nil {
			return fmt.Errorf("dynamic uid %d: holder %s: %w", uid, n, err)
		}
		if len(hh.Dir) < 2 || !slices.Equal(hh.Dir[:2], h.Dir[:2]) {
			return fmt.Errorf("dynamic uid %d is held by allocation %s of job %q, not by job %q: refusing to run a rank as it (the gang's rendezvous names another job's uid)",
				uid, hh.Alloc, jobOf(hh.Dir), jobOf(h.Dir))
		}
		held++
	}
	if held == 0 {
		return fmt.Errorf("dynamic uid %d: its claim is gone: no allocation holds it", uid)
	}
	return nil
}

// jobOf names the job of a checkpoint dir's names ("<namespace>/<job>").
func jobOf(dir []string) string {
	if len(dir) < 2 {
		return "?"
	}
	return dir[0] + "/" + dir[1]
}
