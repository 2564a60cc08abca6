package topology

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Layout wire encoding: one entry per GPU, "index:id:path", entries joined by
// ';' and sorted by index, e.g.
//
//	0:SIM-dev-node-0:socket0/switch0/pair0;1:SIM-dev-node-1:socket0/switch0/pair0
//
// IDs and paths never contain ':' or ';' (ValidateID, ValidatePath), so the
// encoding needs no escaping.
const (
	layoutEntrySep = ";"
	layoutFieldSep = ":"
)

// LayoutEntry is one GPU of a decoded layout attribute.
type LayoutEntry struct {
	// Index is the node-local GPU index.
	Index int
	// ID is the Nomad device instance ID.
	ID string
	// Path is the GPU's position in the node's topology tree, "/"-separated,
	// outermost cell first; empty when the GPU hangs directly off the node.
	Path string
}

// Cells returns the cell names of the entry's path, outermost first.
func (e LayoutEntry) Cells() []string { return SplitPath(e.Path) }

// EncodeLayout encodes the index, ID and path of each GPU, sorted by index.
// The GPUs must be valid (as Parse or a backend guarantees); DecodeLayout
// rejects what it cannot read back.
func EncodeLayout(gpus []GPU) string {
	sorted := make([]GPU, len(gpus))
	copy(sorted, gpus)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	parts := make([]string, len(sorted))
	for i, g := range sorted {
		parts[i] = strconv.Itoa(g.Index) + layoutFieldSep + g.ID + layoutFieldSep + g.Path
	}
	return strings.Join(parts, layoutEntrySep)
}

// DecodeLayout decodes a layout attribute into entries sorted by index. The
// empty string decodes to no entries. Malformed entries, negative or
// non-decimal indexes, invalid IDs or paths, and duplicate indexes or IDs are
// errors naming the entry.
func DecodeLayout(s string) ([]LayoutEntry, error) {
	if s == "" {
		return nil, nil
	}
	raw := strings.Split(s, layoutEntrySep)
	entries := make([]LayoutEntry, 0, len(raw))
	indexes := make(map[int]bool, len(raw))
	ids := make(map[string]bool, len(raw))
	for n, r := range raw {
		fields := strings.Split(r, layoutFieldSep)
		if len(fields) != 3 {
			return nil, fmt.Errorf("layout entry %d %q: want index:id:path, got %d field(s)", n, r, len(fields))
		}
		index, err := parseIndex(fields[0])
		if err != nil {
			return nil, fmt.Errorf("layout entry %d %q: %w", n, r, err)
		}
		if err := ValidateID(fields[1]); err != nil {
			return nil, fmt.Errorf("layout entry %d %q: %w", n, r, err)
		}
		if err := ValidatePath(fields[2]); err != nil {
			return nil, fmt.Errorf("layout entry %d %q: %w", n, r, err)
		}
		if indexes[index] {
			return nil, fmt.Errorf("layout entry %d %q: duplicate index %d", n, r, index)
		}
		if ids[fields[1]] {
			return nil, fmt.Errorf("layout entry %d %q: duplicate id %q", n, r, fields[1])
		}
		indexes[index], ids[fields[1]] = true, true
		entries = append(entries, LayoutEntry{Index: index, ID: fields[1], Path: fields[2]})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Index < entries[j].Index })
	return entries, nil
}

// parseIndex accepts only canonical non-negative decimal integers ("0", "12"),
// so that every index has exactly one encoding.
func parseIndex(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("index is empty")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("index %q is not a non-negative decimal integer", s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("index %q has a leading zero", s)
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("index %q out of range", s)
	}
	return i, nil
}
