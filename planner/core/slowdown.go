package core

// Spread is how far a running job's GPUs reach.
type Spread int

const (
	// OneNode: every GPU on one node.
	OneNode Spread = iota
	// OneRack: several nodes of one rack.
	OneRack
	// Racks: nodes of several racks.
	Racks
)

// Slowdown is the one model of placement slowdown, the simulator's and the
// live planner's: how much slower than on one node job j runs spread as s.
// 1 on one node, its Skew across the nodes of one rack, its CrossRack (0:
// Skew) across racks; never below 1.
func (j *Job) Slowdown(s Spread) float64 {
	switch {
	case s == OneNode:
		return 1
	case s == OneRack || j.CrossRack <= 0:
		return max(1, j.Skew)
	default:
		return max(1, j.CrossRack)
	}
}
