package nomad

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
)

// Held jobs (docs/design.md, "Held jobs"). Every themis job that waits for
// GPUs (queued at submission, adopted from another pool, suspended by a
// preemption, moving between nodes) is held in Nomad with nothing to
// place: every group at count 0, in the pending pool. Nomad then keeps no
// blocked evaluation for it (an evaluation blocked on the empty pending
// pool is unblocked by every capacity change on any node: at 10,000 queued
// jobs, thousands of evaluations at once) and shows it dead. A dead batch
// job is garbage-collectable, so the held version carries a version tag
// (HeldTag, Nomad >= 1.9): Nomad's job GC keeps any job with a tagged
// version (nomad/core_sched.go jobGC, nomad/state/schema.go jobIsGCable).
// The pin removes the tag, so a job that ran and finished is collected as
// before. What the job was held with (its version, its group counts) is
// the planner's record in Consul (lease.Hold), never the job's meta or
// tag, which its user can write.

// HeldTag is the name of the version tag on a held job's held version.
const HeldTag = "themis-held"

// maxTagDescription is Nomad's limit on a tag's description
// (structs.MaxDescriptionCharacters).
const maxTagDescription = 1000

// GroupCounts are the job's group counts by group name (Nomad's default,
// 1, for a group that sets none).
func (j *Job) GroupCounts() map[string]int {
	out := map[string]int{}
	for _, tg := range j.Job.TaskGroups {
		if tg == nil {
			continue
		}
		n := 1
		if tg.Count != nil {
			n = *tg.Count
		}
		out[deref(tg.Name)] = n
	}
	return out
}

// Idle reports whether no group of the job has anything to place (every
// count 0): what a hold registers.
func (j *Job) Idle() bool {
	for _, n := range j.GroupCounts() {
		if n != 0 {
			return false
		}
	}
	return true
}

// HeldTagDescription is the description of the job's current version's
// HeldTag, and whether that version carries it.
func (j *Job) HeldTagDescription() (string, bool) {
	t := j.Job.VersionTag
	if t == nil || t.Name != HeldTag {
		return "", false
	}
	return t.Description, true
}

// Hold re-registers a waiting job with nothing to place (every group at
// count 0, the themis task's GPU request unpinned) in the pending pool,
// with HeldMeta = holdID, check-and-set on the JobModifyIndex the planner
// read. The planner records the version this registers, the hold's ID and
// the counts before (lease.Hold).
func (c *Client) Hold(ctx context.Context, j *Job, holdID string) error {
	if j.Task == "" {
		return fmt.Errorf("hold %s: the job has no one themis task", j.Key)
	}
	return c.edit(ctx, j, "hold", c.holdChange(j, holdID))
}

// holdChange is what Hold changes in the job: HeldMeta names the hold.
func (c *Client) holdChange(j *Job, holdID string) func(job *api.Job, tg *api.TaskGroup, task *api.Task) {
	return func(job *api.Job, tg *api.TaskGroup, task *api.Task) {
		job.Meta[HeldMeta] = holdID
		for _, g := range job.TaskGroups {
			if g != nil {
				zero := 0
				g.Count = &zero
			}
		}
		job.NodePool = &c.pendingPool
		tg.Constraints = withoutTarget(tg.Constraints, "${node.unique.id}")
		setThemisDevice(task, j.Intent.GPUs, nil)
	}
}

// TagHeld tags the job's current version (the planner's hold of it) with
// HeldTag and description, so that Nomad's garbage collection keeps it;
// the tag is named the same on every job, so one on an older version
// (a hold the planner could not untag) is moved. It does not change the
// job's JobModifyIndex (Nomad's UpdateJobVersionTag), so a check-and-set
// on the index read before still holds.
func (c *Client) TagHeld(ctx context.Context, j *Job, description string) error {
	if len(description) > maxTagDescription {
		description = description[:maxTagDescription-3] + "..."
	}
	defer c.wrote()
	q := (&api.WriteOptions{Namespace: j.Key.Namespace}).WithContext(ctx)
	_, err := c.api.Jobs().TagVersion(j.Key.ID, deref(j.Job.Version), HeldTag, description, q)
	if err != nil && strings.Contains(err.Error(), "already exists on a different version") {
		if err = c.UntagHeld(ctx, j.Key); err == nil {
			_, err = c.api.Jobs().TagVersion(j.Key.ID, deref(j.Job.Version), HeldTag, description, q)
		}
	}
	if err != nil {
		return denied(fmt.Errorf("tag %s version %d %q: %w", j.Key, deref(j.Job.Version), HeldTag, err),
			"tag a version of job "+j.Key.String(), `submit-job in namespace "`+j.Key.Namespace+`"`)
	}
	return nil
}

// UntagHeld removes HeldTag from whichever version of the job carries it;
// a job without it (already untagged, or purged) is not an error.
func (c *Client) UntagHeld(ctx context.Context, k core.JobKey) error {
	defer c.wrote()
	_, err := c.api.Jobs().UntagVersion(k.ID, HeldTag, (&api.WriteOptions{Namespace: k.Namespace}).WithContext(ctx))
	if err != nil && !strings.Contains(err.Error(), "not found") {
		return denied(fmt.Errorf("untag %s %q: %w", k, HeldTag, err), "untag a version of job "+k.String(), `submit-job in namespace "`+k.Namespace+`"`)
	}
	return nil
}
