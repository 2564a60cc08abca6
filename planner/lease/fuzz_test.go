package lease

import (
	"strings"
	"testing"
)

// FuzzParseJobKey: any key either fails with an error that quotes it, or
// parses to a namespace and job that JobKey turns into a key parsing to
// the same pair; and JobKey of any namespace and job parses back to them.
func FuzzParseJobKey(f *testing.F) {
	f.Add(JobKey("default", "hello"), "default", "hello")
	f.Add(JobKey("team a", "job/with/slashes"), "ns%2F", "%zz")
	f.Add("themis/leases/jobs/", "", "x")
	f.Add("themis/leases/gpus/SIM-0", "a/b", "")
	f.Fuzz(func(t *testing.T, key, ns, job string) {
		if gotNS, gotJob, err := ParseJobKey(key); err != nil {
			if !strings.Contains(err.Error(), "lease key") {
				t.Fatalf("ParseJobKey(%q): error does not say which key: %v", key, err)
			}
		} else {
			n2, j2, err := ParseJobKey(JobKey(gotNS, gotJob))
			if err != nil || n2 != gotNS || j2 != gotJob {
				t.Fatalf("ParseJobKey(%q) = %q, %q; its JobKey parses to %q, %q, %v", key, gotNS, gotJob, n2, j2, err)
			}
		}
		if ns == "" || job == "" {
			return
		}
		n2, j2, err := ParseJobKey(JobKey(ns, job))
		if err != nil || n2 != ns || j2 != job {
			t.Fatalf("JobKey(%q, %q) = %q parses to %q, %q, %v", ns, job, JobKey(ns, job), n2, j2, err)
		}
	})
}
