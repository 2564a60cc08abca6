package device

import (
	"reflect"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/device/topology"
)

// linkMatrix builds a symmetric link function from a per-pair rule.
func linkMatrix(rule func(i, j int) Link) func(i, j int) Link {
	return func(i, j int) Link {
		if i > j {
			i, j = j, i
		}
		return rule(i, j)
	}
}

func TestCellPaths(t *testing.T) {
	// An 8-GPU PCIe box: 2 sockets x 2 switches x 2 GPUs.
	pcie := func(i, j int) Link {
		switch {
		case i/2 == j/2:
			return LinkSwitch
		case i/4 == j/4:
			return LinkHostBridge
		default:
			return LinkSystem
		}
	}
	tests := []struct {
		name   string
		n      int
		link   func(i, j int) Link
		socket func([]int) (int, bool)
		want   []string
	}{
		{name: "one GPU", n: 1, link: pcie, want: []string{""}},
		{name: "pcie box", n: 8, link: pcie, want: []string{
			"socket0/switch0", "socket0/switch0", "socket0/switch1", "socket0/switch1",
			"socket1/switch2", "socket1/switch2", "socket1/switch3", "socket1/switch3"}},
		{name: "pcie box, sockets named by NUMA node", n: 8, link: pcie,
			socket: func(m []int) (int, bool) { return 1 - m[0]/4, true },
			want: []string{
				"socket1/switch0", "socket1/switch0", "socket1/switch1", "socket1/switch1",
				"socket0/switch2", "socket0/switch2", "socket0/switch3", "socket0/switch3"}},
		{name: "NUMA numbers that clash are not used", n: 8, link: pcie,
			socket: func([]int) (int, bool) { return 0, true },
			want: []string{
				"socket0/switch0", "socket0/switch0", "socket0/switch1", "socket0/switch1",
				"socket1/switch2", "socket1/switch2", "socket1/switch3", "socket1/switch3"}},
		{name: "NVSwitch: one NVLink domain is the node", n: 8,
			link: func(i, j int) Link { return LinkNVLink },
			want: []string{"", "", "", "", "", "", "", ""}},
		{name: "NVLink pairs in a PCIe box", n: 8, link: func(i, j int) Link {
			if i/2 == j/2 {
				return LinkNVLink // each switch's two GPUs are bridged
			}
			return pcie(i, j)
		}, want: []string{
			"socket0/nvlink0", "socket0/nvlink0", "socket0/nvlink1", "socket0/nvlink1",
			"socket1/nvlink2", "socket1/nvlink2", "socket1/nvlink3", "socket1/nvlink3"}},
		{name: "a lone GPU on its switch", n: 3, link: func(i, j int) Link {
			if j == 2 {
				return LinkHostBridge
			}
			return LinkSwitch
		}, want: []string{"switch0", "switch0", ""}},
		{name: "unknown links: all under the node", n: 4,
			link: func(i, j int) Link { return LinkSystem },
			want: []string{"", "", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cellPaths(tt.n, linkMatrix(tt.link), tt.socket)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cellPaths =\n  %q\nwant\n  %q", got, tt.want)
			}
			checkTree(t, tt.n, linkMatrix(tt.link), got)
		})
	}
}

// checkTree checks what every cellPaths result keeps: valid paths, one
// parent per cell, no cell of one GPU or of the whole node, and GPUs joined
// by a link share a cell of that link's level or a closer one.
func checkTree(t *testing.T, n int, link func(i, j int) Link, paths []string) {
	t.Helper()
	if len(paths) != n {
		t.Fatalf("%d paths for %d GPUs", len(paths), n)
	}
	parentOf := map[string]string{}
	size := map[string]int{}
	for i, p := range paths {
		if err := topology.ValidatePath(p); err != nil {
			t.Fatalf("GPU %d: %v", i, err)
		}
		cells := topology.SplitPath(p)
		for k, c := range cells {
			parent := strings.Join(cells[:k], "/")
			if prev, ok := parentOf[c]; ok && prev != parent {
				t.Fatalf("cell %q has parents %q and %q", c, prev, parent)
			}
			parentOf[c] = parent
			size[c]++
		}
	}
	for c, s := range size {
		if s < 2 || s == n {
			t.Errorf("cell %q holds %d of %d GPUs", c, s, n)
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			l := link(i, j)
			if l >= LinkSystem {
				continue
			}
			// i and j are in one group at level l: each cell of i at a level
			// >= l (a farther cell) must hold j too.
			for _, c := range topology.SplitPath(paths[i]) {
				if levelOf(c) >= l && !strings.Contains("/"+paths[j]+"/", "/"+c+"/") {
					t.Errorf("GPUs %d and %d linked by %v but %q holds only %d", i, j, l, c, i)
				}
			}
		}
	}
}

func levelOf(cell string) Link {
	name := strings.TrimRight(cell, "0123456789")
	for l, prefix := range cellLevel {
		if prefix == name {
			return Link(l)
		}
	}
	return LinkSystem
}

// FuzzCellPaths checks the tree properties on arbitrary link matrices.
func FuzzCellPaths(f *testing.F) {
	f.Add([]byte{8, 2, 2, 4, 4, 6, 6, 6, 2, 4, 4, 6, 6})
	f.Add([]byte{3, 0, 5, 1})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		n := int(data[0])%12 + 1
		rest := data[1:]
		link := linkMatrix(func(i, j int) Link {
			k := i*n + j
			if len(rest) == 0 {
				return LinkSystem
			}
			return Link(int(rest[k%len(rest)]) % (int(LinkSystem) + 1))
		})
		socket := func(m []int) (int, bool) { return m[0] % 3, len(rest)%2 == 0 }
		paths := cellPaths(n, link, socket)
		checkTree(t, n, link, paths)
		if again := cellPaths(n, link, socket); !reflect.DeepEqual(again, paths) {
			t.Fatalf("not deterministic: %q then %q", paths, again)
		}
	})
}
