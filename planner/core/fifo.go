package core

import (
	"fmt"
	"sort"
	"time"
)

// Policy orders queued jobs and asks the placement for their GPUs. It is the
// per-virtual-cluster queue policy of the design (FIFO, Tiresias, Themis, ...).
type Policy interface {
	Name() string
	// Schedule grants GPUs from free to some of the queued jobs and says why
	// the others wait. It must take every granted GPU from free.
	Schedule(now time.Time, queued []Job, free *FreeGPUs) ([]Grant, []Wait)
}

// FIFO is YARN's capacity scheduler as the Tiresias paper uses it: jobs in
// submission order, each placed consolidated, and head-of-line blocking: when
// the oldest job does not fit, nothing behind it starts. A job larger than any
// node can never start and does not block the queue.
type FIFO struct{}

// Name implements Policy.
func (FIFO) Name() string { return "fifo" }

// Schedule implements Policy.
func (FIFO) Schedule(_ time.Time, queued []Job, free *FreeGPUs) ([]Grant, []Wait) {
	jobs := append([]Job(nil), queued...)
	SortFIFO(jobs)
	var grants []Grant
	var waits []Wait
	var head *Job
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.GPUs > free.Largest():
			waits = append(waits, Wait{j.Key, fmt.Sprintf("needs %d GPUs on one node; the largest schedulable node has %d healthy GPUs", j.GPUs, free.Largest())})
		case head != nil:
			waits = append(waits, Wait{j.Key, fmt.Sprintf("behind %s in the FIFO queue", head.Key)})
		default:
			if g, ok := free.Place(j.Key, j.GPUs); ok {
				grants = append(grants, g)
				continue
			}
			head = j
			waits = append(waits, Wait{j.Key, fmt.Sprintf("head of the FIFO queue: waiting for %d free GPUs on one node", j.GPUs)})
		}
	}
	return grants, waits
}

// SortFIFO orders jobs by submission time, then sequence, then key.
func SortFIFO(jobs []Job) {
	sort.SliceStable(jobs, func(a, b int) bool {
		ja, jb := &jobs[a], &jobs[b]
		if !ja.Submitted.Equal(jb.Submitted) {
			return ja.Submitted.Before(jb.Submitted)
		}
		if ja.Seq != jb.Seq {
			return ja.Seq < jb.Seq
		}
		return ja.Key.String() < jb.Key.String()
	})
}
