package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The tables name a job's GPUs in a few characters: 8 GPU UUIDs side by
// side are over 300 columns. shortGPUs writes a list of GPU ids as ranges
// where the ids end in their index (SIM-node-0-[0-3,6]), else as a count
// ("8 GPUs"); -verbose and -json give every id.

// maxGPUCell is the widest a shortened GPU list may be before it becomes
// a count.
const maxGPUCell = 32

// shortGPUs is ids for a table cell: one id as it is, ids sharing a
// prefix and ending in numbers as prefix[ranges] (one group per prefix),
// else their count.
func shortGPUs(ids []string) string {
	switch {
	case len(ids) == 0:
		return ""
	case len(ids) == 1 && len(ids[0]) <= maxGPUCell+8:
		return ids[0]
	}
	count := plural(len(ids), "GPU")
	var prefixes []string
	nums := map[string][]int{}
	for _, id := range ids {
		p, n, ok := splitIndex(id)
		if !ok {
			return count
		}
		if _, seen := nums[p]; !seen {
			prefixes = append(prefixes, p)
		}
		nums[p] = append(nums[p], n)
	}
	groups := make([]string, len(prefixes))
	for i, p := range prefixes {
		groups[i] = p + "[" + ranges(nums[p]) + "]"
		if len(nums[p]) == 1 {
			groups[i] = p + strconv.Itoa(nums[p][0])
		}
	}
	if s := strings.Join(groups, ","); len(s) <= maxGPUCell {
		return s
	}
	return count
}

// splitIndex splits an id into its prefix and the decimal number it ends
// in (SIM-node-0-12: SIM-node-0-, 12); ok is false when it ends in none,
// or in a number written with a leading zero (it would not read back).
func splitIndex(id string) (prefix string, n int, ok bool) {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	digits := id[i:]
	if digits == "" || len(digits) > 6 || (len(digits) > 1 && digits[0] == '0') {
		return "", 0, false
	}
	n, err := strconv.Atoi(digits)
	return id[:i], n, err == nil
}

// ranges writes numbers as sorted ranges: 0,1,2,3,6 -> "0-3,6".
func ranges(ns []int) string {
	ns = slices.Clone(ns)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	var out []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j > i {
			out = append(out, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		} else {
			out = append(out, strconv.Itoa(ns[i]))
		}
		i = j + 1
	}
	return strings.Join(out, ",")
}

// tableWidth is the widest line a table prints without -verbose: a
// terminal's width with room to spare.
const tableWidth = 160

// fitReasons cuts the last column (a reason, of any length) of a table's
// lines so that each line is at most tableWidth runes, ending the cut
// reason in "…"; the column keeps at least 24 runes, so a table whose other
// columns are too wide stays too wide (TestTablesFitTheDevCluster). The
// header line is the first; the last column starts where its title does.
func fitReasons(table string) string {
	lines := strings.Split(table, "\n")
	if len(lines) == 0 {
		return table
	}
	title := strings.LastIndex(lines[0], " ")
	if title < 0 {
		return table
	}
	start := len([]rune(lines[0][:title+1]))
	limit := max(tableWidth, start+24)
	for i, l := range lines {
		if r := []rune(l); len(r) > limit {
			lines[i] = string(r[:limit-1]) + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// writeTable writes a rendered table, its long reasons cut unless verbose.
func writeTable(out io.Writer, table string, verbose bool) {
	if !verbose {
		table = fitReasons(table)
	}
	io.WriteString(out, table)
}
