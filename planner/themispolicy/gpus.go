package themispolicy

import (
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/themis"
)

// Sets of GPUs: their placement class, their node, equality.

// classOf is the placement class of a set of GPUs.
func classOf(free *core.FreeGPUs, gpus []string) themis.Class {
	var node, rack string
	c := themis.SameMachine
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
			return themis.CrossRack
		}
		if n.ID != node {
			c = themis.SameRack
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
