package httpapi

import "testing"

// A queued job whose grant waits for its GPUs shows as waiting, with the
// reasons the planner writes for it (planner/round.go's waitingFor, a
// moved job's checkpoint); every other state shows as recorded.
func TestShownState(t *testing.T) {
	for _, tc := range []struct{ state, reason, want string }{
		{"queued", "granted 2 GPUs on dev-node; waiting for default/be to stop (checkpointing, grace period until 20:58:30)", "waiting"},
		{"queued", "granted 8 GPUs on node-0; waiting for default/x, set aside (unreadable), which holds them", "waiting"},
		{"queued", "moving: checkpointing before it resumes on node-1", "waiting"},
		{"queued", "behind default/a in the fitgpp queue", "queued"},
		{"queued", "waiting for 8 free GPUs (6 free)", "queued"},
		{"queued", "", "queued"},
		{"suspended", "granted 2 GPUs on dev-node; waiting for default/be to stop", "suspended"},
		{"granted", "", "granted"},
		{"revoking", "preempted by fitgpp for default/te", "revoking"},
		{"purged", "", "purged"},
	} {
		if got := ShownState(tc.state, tc.reason); got != tc.want {
			t.Errorf("ShownState(%q, %q) = %q, want %q", tc.state, tc.reason, got, tc.want)
		}
	}
}
