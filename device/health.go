package device

import (
	"fmt"
	"sync"
	"time"
)

// applicationXIDs are the XIDs an application causes (NVIDIA's Kubernetes
// device plugin skips the same ones): they say nothing about the GPU, so
// they do not mark it unhealthy.
//
//	13  graphics engine exception     31  GPU memory page fault
//	43  GPU stopped processing        45  preemptive cleanup
//	68  video processor exception    109  context switch timeout
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// gpuHealth remembers the GPUs that NVML events marked bad, by UUID, and
// says when they are good again. Safe for concurrent use.
type gpuHealth struct {
	// recovery is how long after its last bad event a GPU is good again;
	// 0 is never.
	recovery time.Duration

	mu  sync.Mutex
	bad map[string]badEvent
}

// badEvent is the last event that marked a GPU bad.
type badEvent struct {
	what string // "XID 79", "double-bit ECC error"
	at   time.Time
}

func newGPUHealth(recovery time.Duration) *gpuHealth {
	return &gpuHealth{recovery: recovery, bad: map[string]badEvent{}}
}

// xid records a critical XID on a GPU; application XIDs are ignored (the
// result says whether it counted).
func (h *gpuHealth) xid(uuid string, xid uint64, at time.Time) bool {
	if applicationXIDs[xid] {
		return false
	}
	h.markBad(uuid, fmt.Sprintf("XID %d", xid), at)
	return true
}

// markBad records that what happened to a GPU at at.
func (h *gpuHealth) markBad(uuid, what string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if prev, ok := h.bad[uuid]; ok && prev.at.After(at) {
		return
	}
	h.bad[uuid] = badEvent{what: what, at: at}
}

// check reports whether a GPU is healthy at now and, if not, why. A GPU is
// good again once recovery has passed since its last bad event.
func (h *gpuHealth) check(uuid string, now time.Time) (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.bad[uuid]
	if !ok {
		return true, ""
	}
	if h.recovery > 0 && now.Sub(e.at) >= h.recovery {
		delete(h.bad, uuid)
		return true, ""
	}
	desc := fmt.Sprintf("%s at %s", e.what, e.at.UTC().Format(time.RFC3339))
	if h.recovery > 0 {
		desc += fmt.Sprintf("; healthy again at %s unless another follows", e.at.Add(h.recovery).UTC().Format(time.RFC3339))
	}
	return false, desc
}
