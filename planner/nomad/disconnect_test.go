package nomad

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A pin sets the themis group's disconnect block to stop_on_client_after
// and nothing Nomad would refuse beside it (lost_after, the deprecated
// fields), for the job types Nomad takes it for.
func TestPinSetsStopOnClientAfter(t *testing.T) {
	hour := time.Hour
	for _, tc := range []struct {
		name     string
		jobType  *string
		group    func(tg *api.TaskGroup)
		set      time.Duration // SetStopOnClientAfter, 0: the default
		wantStop bool
	}{
		{name: "batch job", jobType: ptr("batch"), wantStop: true},
		{name: "service job", jobType: ptr("service"), wantStop: true},
		{name: "the planner's -stop-on-client-after", jobType: ptr("batch"), set: 45 * time.Second, wantStop: true},
		{name: "no type (service)", wantStop: true},
		{name: "the user's lost_after replaced", jobType: ptr("batch"), wantStop: true, group: func(tg *api.TaskGroup) {
			tg.Disconnect = &api.DisconnectStrategy{LostAfter: &hour}
			tg.MaxClientDisconnect, tg.StopAfterClientDisconnect = &hour, &hour
		}},
		{name: "sysbatch job left alone", jobType: ptr("sysbatch")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, j := pinSetup(t)
			c.SetStopOnClientAfter(tc.set)
			want := DefaultStopOnClientAfter
			if tc.set > 0 {
				want = tc.set
			}
			job := userJob("a", 1)
			job.Type = tc.jobType
			tg := job.TaskGroups[0]
			if tc.group != nil {
				tc.group(tg)
			}
			c.pinChange(j, pinLease(), "gpu", 0)(job, tg, tg.Tasks[0])
			d := tg.Disconnect
			if !tc.wantStop {
				if d != nil {
					t.Fatalf("disconnect %+v, want none", d)
				}
				return
			}
			if d == nil || d.StopOnClientAfter == nil || *d.StopOnClientAfter != want || d.LostAfter != nil {
				t.Fatalf("disconnect %+v, want stop_on_client_after = %s alone", d, want)
			}
			if tg.MaxClientDisconnect != nil || tg.StopAfterClientDisconnect != nil {
				t.Fatalf("deprecated fields kept: %v %v", tg.MaxClientDisconnect, tg.StopAfterClientDisconnect)
			}
		})
	}
}
