package driver

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// sweepIdentities removes the claims a driver of this host left behind
// (identity.go): holders of this host whose allocation the driver does
// not hold, older than claimStale, whose uid no process runs as (a task
// recovered after a restart still runs as it, before or after its
// RecoverTask). Their checkpoint dirs go back to root, unless another
// holder shares them. It returns what it removed.
func (d *Driver) sweepIdentities(root *nofollow.Dir, now time.Time) ([]string, error) {
	host, _ := os.Hostname()
	uids, err := openUIDs(root)
	if err != nil {
		return nil, err
	}
	defer uids.Close()
	names, err := uids.Names()
	if err != nil {
		return nil, err
	}
	var busy map[int]bool
	var removed []string
	for _, n := range names {
		uid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		claim, _, err := uids.Sub(n, 0)
		if err != nil {
			continue
		}
		files, _ := claim.Names()
		for _, f := range files {
			h, err := readHolder(claim, f)
			if err != nil || h.Host != host || now.Sub(h.Since) < claimStale {
				continue
			}
			if _, ok := d.ids.held(h.Alloc); ok {
				continue
			}
			if busy == nil {
				if busy, err = uidsRunning(); err != nil {
					claim.Close()
					return removed, err
				}
			}
			if busy[uid] {
				continue
			}
			shared, err := dropHolder(uids, uid, f, h.Dir)
			if err != nil {
				continue
			}
			if !shared {
				_ = resetCheckpointDir(root, h.Dir, uid)
			}
			removed = append(removed, fmt.Sprintf("uid %d: alloc %s task %s", uid, h.Alloc, h.Task))
		}
		claim.Close()
	}
	return removed, nil
}
