package arbiter

import (
	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// Sets of GPUs: their placement class, their node, equality.

// classOf is the placement class of a set of GPUs.
func classOf(free *core.FreeGPUs, gpus []string) auction.Class {
	var node, rack string
	c := auction.SameMachine
	for i, id := range gpus {
		n, ok := free.Locate(id)
		if !ok {
			continue
		}
		if i == 0 || node == "" {
			node, rack = n.ID, n.Rack
			continue
		}
		if n.Rack != rack {
			return auction.CrossRack
		}
		if n.ID != node {
			c = auction.SameRack
		}
	}
	return c
}

// nodeOf is the grant's Node: the node of all its GPUs, or "" when they
// span several.
func nodeOf(free *core.FreeGPUs, gpus []string) string {
	node := ""
	for i, id := range gpus {
		n, ok := free.Locate(id)
		if !ok {
			return ""
		}
		if i == 0 {
			node = n.ID
		} else if n.ID != node {
			return ""
		}
	}
	return node
}

// sameSet reports whether a and b hold the same GPUs.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]bool, len(a))
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}
