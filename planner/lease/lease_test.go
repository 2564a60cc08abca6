package lease

import (
	"strings"
	"testing"
)

func TestJobKeyRoundTrip(t *testing.T) {
	for _, c := range []struct{ ns, job string }{
		{"default", "hello"}, {"team-a", "sweep/lr=0.1"}, {"default", "a b%c"},
	} {
		ns, job, err := ParseJobKey(JobKey(c.ns, c.job))
		if err != nil || ns != c.ns || job != c.job {
			t.Fatalf("%q/%q -> %q -> %q/%q %v", c.ns, c.job, JobKey(c.ns, c.job), ns, job, err)
		}
	}
	for _, bad := range []string{"themis/other/x", JobPrefix() + "onlyns", JobPrefix() + "/job", JobPrefix() + "ns/%zz"} {
		if _, _, err := ParseJobKey(bad); err == nil {
			t.Errorf("ParseJobKey(%q) accepted", bad)
		}
	}
}

func TestVerify(t *testing.T) {
	mine := &GPULease{Namespace: "default", JobID: "a", GPU: "g0"}
	other := &GPULease{Namespace: "default", JobID: "b", GPU: "g1"}
	otherNS := &GPULease{Namespace: "prod", JobID: "a", GPU: "g1"}
	cases := []struct {
		name    string
		gpus    []string
		leases  map[string]*GPULease
		wantErr string
	}{
		{"all leased", []string{"g0"}, map[string]*GPULease{"g0": mine}, ""},
		{"no GPUs", nil, nil, ""},
		{"missing lease", []string{"g0", "g1"}, map[string]*GPULease{"g0": mine}, "GPU g1 has no themis lease"},
		{"leased to another job", []string{"g1"}, map[string]*GPULease{"g1": other}, `leased to job "b"`},
		{"leased in another namespace", []string{"g1"}, map[string]*GPULease{"g1": otherNS}, `namespace "prod"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify("default", "a", tc.gpus, tc.leases)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestGPULeasesExpand(t *testing.T) {
	j := JobLease{LeaseID: "L", Namespace: "n", JobID: "j", NodeID: "N", GPUs: []string{"a", "b"}}
	gl := j.GPULeases()
	if len(gl) != 2 || gl[1].GPU != "b" || gl[1].LeaseID != "L" || gl[0].NodeID != "N" {
		t.Fatalf("%+v", gl)
	}
}
