package device

import (
	"sort"
	"strconv"
	"strings"

	"github.com/themis-nomad/themis/device/topology"
)

// Link is how closely two GPUs of one node are connected, closest first.
// The nvml backend reads it from NVML (NVLink peers, then the PCIe common
// ancestor, then the NUMA node) and turns the node's links into cells with
// cellPaths.
type Link int

// The links, closest first. Each but LinkSystem names the cells of GPUs that
// reach each other through it or a closer link.
const (
	// LinkNVLink: an NVLink between the two, direct or through NVSwitch.
	LinkNVLink Link = iota
	// LinkBoard: the same multi-GPU board (NVML TOPOLOGY_INTERNAL).
	LinkBoard
	// LinkSwitch: one PCIe switch (TOPOLOGY_SINGLE).
	LinkSwitch
	// LinkSwitches: several PCIe switches, no host bridge (TOPOLOGY_MULTIPLE).
	LinkSwitches
	// LinkHostBridge: one PCIe host bridge (TOPOLOGY_HOSTBRIDGE).
	LinkHostBridge
	// LinkSocket: one CPU socket / NUMA node (TOPOLOGY_NODE, or the same
	// NUMA node when the PCIe ancestor is unknown).
	LinkSocket
	// LinkSystem: across sockets (TOPOLOGY_SYSTEM), or unknown.
	LinkSystem
)

// cellLevel is the name prefix of the cells each link forms.
var cellLevel = [...]string{
	LinkNVLink:     "nvlink",
	LinkBoard:      "board",
	LinkSwitch:     "switch",
	LinkSwitches:   "switches",
	LinkHostBridge: "bridge",
	LinkSocket:     "socket",
}

func (l Link) String() string {
	if l >= 0 && int(l) < len(cellLevel) {
		return cellLevel[l]
	}
	if l == LinkSystem {
		return "system"
	}
	return "link(" + strconv.Itoa(int(l)) + ")"
}

// cellPaths turns the pairwise links of a node's n GPUs into each GPU's
// topology path (topology.GPU.Path), by single-linkage grouping: at each
// link level L, the GPUs that reach each other through links of L or closer
// (transitively) form one cell. Groups at a closer level nest inside the
// groups at a farther one, so the cells form a tree. Then:
//
//   - a cell holding every GPU of the node is the node itself and is left
//     out, as is a cell of one GPU (the GPU is its own cell);
//   - where several levels group the same GPUs, they are one cell, named
//     after the most telling level: nvlink, then socket, switch, board,
//     bridge, switches (namePriority);
//   - cells are named by level and numbered across the node in the order of
//     their lowest GPU ("socket0/switch1"); socket cells are numbered by
//     socket(members) instead when it gives each socket cell its own number.
//
// link must be symmetric; link(i, i) is not called. socket may be nil.
func cellPaths(n int, link func(i, j int) Link, socket func(members []int) (int, bool)) []string {
	if n <= 0 {
		return nil
	}
	// groups[l][i] is the lowest GPU of i's group at level l.
	levels := int(LinkSystem)
	groups := make([][]int, levels)
	for l := range levels {
		groups[l] = linkGroups(n, func(i, j int) bool { return link(i, j) <= Link(l) })
	}
	// keep[l][root]: the group rooted at root is a cell of its own at l.
	members := make([]map[int][]int, levels)
	for l := range levels {
		members[l] = map[int][]int{}
		for i, r := range groups[l] {
			members[l][r] = append(members[l][r], i)
		}
	}
	keep := make([]map[int]bool, levels)
	for l := range levels {
		keep[l] = map[int]bool{}
		for root, ms := range members[l] {
			if len(ms) < 2 || len(ms) == n {
				continue
			}
			if bestLevel(l, root, len(ms), members) == Link(l) {
				keep[l][root] = true
			}
		}
	}
	names := make([]map[int]string, levels)
	for l := range levels {
		names[l] = nameCells(Link(l), keep[l], members[l], socket)
	}
	paths := make([]string, n)
	for i := range n {
		var cells []string
		for l := levels - 1; l >= 0; l-- {
			if name, ok := names[l][groups[l][i]]; ok {
				cells = append(cells, name)
			}
		}
		paths[i] = strings.Join(cells, topology.PathSeparator)
	}
	return paths
}

// namePriority ranks the level names a cell may take when several levels
// group the same GPUs, most telling first.
var namePriority = [...]Link{LinkNVLink, LinkSocket, LinkSwitch, LinkBoard, LinkHostBridge, LinkSwitches}

// bestLevel returns the level whose name the group rooted at root (of size
// GPUs at level l) takes: of the run of levels around l that group the same
// GPUs, the one namePriority ranks first. Groups nest, so a group at another
// level with the same root and size holds the same GPUs.
func bestLevel(l, root, size int, members []map[int][]int) Link {
	lo, hi := l, l
	for lo > 0 && len(members[lo-1][root]) == size {
		lo--
	}
	for hi+1 < len(members) && len(members[hi+1][root]) == size {
		hi++
	}
	for _, p := range namePriority {
		if int(p) >= lo && int(p) <= hi {
			return p
		}
	}
	return Link(l)
}

// nameCells names the kept cells of one level: level prefix and a number,
// numbered in the order of their lowest GPU, or, for sockets, by socket()
// when that gives every kept socket cell a distinct number.
func nameCells(l Link, keep map[int]bool, members map[int][]int, socket func([]int) (int, bool)) map[int]string {
	roots := make([]int, 0, len(keep))
	for r := range keep {
		roots = append(roots, r)
	}
	sort.Ints(roots)
	nums := make([]int, len(roots))
	for k := range roots {
		nums[k] = k
	}
	if l == LinkSocket && socket != nil {
		seen := map[int]bool{}
		byNUMA := make([]int, 0, len(roots))
		for _, r := range roots {
			s, ok := socket(members[r])
			if !ok || s < 0 || seen[s] {
				break
			}
			seen[s] = true
			byNUMA = append(byNUMA, s)
		}
		if len(byNUMA) == len(roots) {
			nums = byNUMA
		}
	}
	names := make(map[int]string, len(roots))
	for k, r := range roots {
		names[r] = cellLevel[l] + strconv.Itoa(nums[k])
	}
	return names
}

// linkGroups returns, for each of n items, the lowest item of its connected
// component under joined (union-find).
func linkGroups(n int, joined func(i, j int) bool) []int {
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if !joined(i, j) {
				continue
			}
			a, b := find(i), find(j)
			if a == b {
				continue
			}
			if a < b {
				parent[b] = a
			} else {
				parent[a] = b
			}
		}
	}
	out := make([]int, n)
	for i := range out {
		out[i] = find(i)
	}
	return out
}
