package check

import (
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// The watcher takes a job whose meta names a lease, in either spelling
// (themis.lease_id, or themis.lease as planners before #34 wrote it), or a
// suspension for a themis job, whatever its tasks.
func TestPlannerMarkedReadsBothLeaseKeys(t *testing.T) {
	cases := []struct {
		meta map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"owner": "ml", "themis.restart_count": "1"}, false},
		{map[string]string{"themis.lease_id": "L"}, true},
		{map[string]string{"themis.lease": "L"}, true},
		{map[string]string{"themis.lease_id": "", "themis.lease": ""}, false},
		{map[string]string{"themis.suspended": "L"}, true},
	}
	for _, tc := range cases {
		if got := plannerMarked(tc.meta); got != tc.want {
			t.Errorf("plannerMarked(%v) = %v, want %v", tc.meta, got, tc.want)
		}
		j := &nomadapi.Job{Meta: tc.meta, TaskGroups: []*nomadapi.TaskGroup{{Tasks: []*nomadapi.Task{{Name: "t", Driver: "raw_exec"}}}}}
		if got := isThemis(j); got != tc.want {
			t.Errorf("isThemis of a raw_exec job with meta %v = %v, want %v", tc.meta, got, tc.want)
		}
	}
}
