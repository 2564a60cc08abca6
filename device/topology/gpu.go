package topology

import (
	"fmt"
	"strings"
	"unicode"
)

// PathSeparator separates the cell names of a GPU's position in its node's
// topology tree ("socket0/switch0/pair0").
const PathSeparator = "/"

// GPU is one GPU instance as a backend reports it: where it sits in the node's
// topology tree, what it is, and whether it can be used.
type GPU struct {
	// Index is the node-local GPU index (what CUDA_VISIBLE_DEVICES names).
	Index int
	// ID is the node-unique device ID Nomad schedules by ("GPU-<uuid>" for
	// NVML, "SIM-<node>-<index>" by default for a simulated topology).
	ID string
	// Model is the GPU model name, e.g. "A100-SXM4-80GB"; it becomes the
	// Nomad device group name.
	Model string
	// MemoryMiB is the GPU's memory in MiB.
	MemoryMiB int64
	// Path is the GPU's position in the node's topology tree, outermost cell
	// first, cells separated by "/" ("socket0/switch0/pair0"). Empty means
	// the GPU hangs directly off the node.
	Path string
	// Healthy reports whether the GPU may be scheduled.
	Healthy bool
	// HealthDescription says why the GPU is unhealthy; empty when healthy.
	HealthDescription string
	// PCIBusID is the PCI bus ID when known ("00000000:3B:00.0"), else empty.
	PCIBusID string
}

// Cells returns the cell names of the GPU's path, outermost first.
func (g GPU) Cells() []string { return SplitPath(g.Path) }

// SplitPath splits a topology path into its cell names. The empty path has no
// cells.
func SplitPath(path string) []string {
	if path == "" {
		return nil
	}
	return strings.Split(path, PathSeparator)
}

// ValidatePath checks that a topology path is empty or made of non-empty cell
// names free of whitespace and of the characters the layout encoding and
// Nomad constraints reserve (',', '=', ';', ':').
func ValidatePath(path string) error {
	if path == "" {
		return nil
	}
	for i, cell := range SplitPath(path) {
		if cell == "" {
			return fmt.Errorf("path %q: cell %d is empty", path, i)
		}
		if r, ok := badRune(cell, ",=;:"); ok {
			return fmt.Errorf("path %q: cell %q contains %q", path, cell, r)
		}
	}
	return nil
}

// ValidateID checks that a GPU ID is non-empty and free of whitespace and of
// ',' (Nomad joins device IDs with commas), ';' and ':' (the layout encoding's
// separators).
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("id is empty")
	}
	if r, ok := badRune(id, ",;:"); ok {
		return fmt.Errorf("id %q contains %q", id, r)
	}
	return nil
}

// badRune returns the first rune of s that is whitespace, a control
// character, invalid UTF-8 or one of reserved.
func badRune(s, reserved string) (rune, bool) {
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar || strings.ContainsRune(reserved, r) {
			return r, true
		}
	}
	return 0, false
}
