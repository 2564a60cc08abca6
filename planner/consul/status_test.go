package consul

import (
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
)

func setOps(sizes ...int) api.TxnOps {
	var ops api.TxnOps
	for _, n := range sizes {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "k", Value: []byte(strings.Repeat("x", n))}})
	}
	return ops
}

func chunkLens(cs []api.TxnOps) []int {
	var out []int
	for _, c := range cs {
		out = append(out, len(c))
	}
	return out
}

// Transactions hold at most MaxTxnOps-1 operations (one is kept for the
// leader's fence) and maxTxnValueBytes of values, in order, and every
// operation lands in exactly one.
func TestTxnChunks(t *testing.T) {
	many := make([]int, 2*MaxTxnOps+5)
	for i := range many {
		many[i] = 300
	}
	big := maxTxnValueBytes/2 + 1
	for _, c := range []struct {
		name  string
		sizes []int
		want  []int
	}{
		{"none", nil, nil},
		{"one", []int{10}, []int{1}},
		{"exactly the limit", many[:MaxTxnOps-1], []int{MaxTxnOps - 1}},
		{"over the op limit", many, []int{MaxTxnOps - 1, MaxTxnOps - 1, 7}},
		{"over the byte limit", []int{big, big, 0, big}, []int{1, 2, 1}},
		{"one value over the byte limit alone", []int{10, 2 * maxTxnValueBytes, 10}, []int{1, 1, 1}},
	} {
		ops := setOps(c.sizes...)
		cs := txnChunks(ops)
		got := chunkLens(cs)
		if len(got) != len(c.want) {
			t.Errorf("%s: chunks of %v, want %v", c.name, got, c.want)
			continue
		}
		i := 0
		for j, ch := range cs {
			if len(ch) != c.want[j] {
				t.Errorf("%s: chunks of %v, want %v", c.name, got, c.want)
			}
			for _, op := range ch {
				if op != ops[i] {
					t.Fatalf("%s: operation %d out of order", c.name, i)
				}
				i++
			}
		}
	}
}
