package planner

import (
	"strings"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
)

// What the fakes (fakes_test.go) do with jobs and records that cannot be
// read: as the real adapters, a listing returns what it can use with a
// *consul.UnreadableError, and the snapshot sets unreadable jobs aside.

// markUnreadable records an unreadable job in the snapshot, as the real
// adapter does (nomad.Client.Snapshot).
func markUnreadable(s *nomad.Snapshot, k core.JobKey, err error) {
	if s.Unreadable == nil {
		s.Unreadable = map[core.JobKey]string{}
	}
	s.Unreadable[k] = err.Error()
}

// unreadable is the error a listing under prefix returns with what it
// could use.
func (s *fakeStore) unreadable(prefix string) error {
	var keys []consul.BadKey
	for _, b := range s.bad {
		if strings.HasPrefix(b.Key, prefix) {
			keys = append(keys, b)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return &consul.UnreadableError{Keys: keys}
}

// withoutBad deletes from m (a copy the listing hands out) the entries
// under prefix that s.bad names, and returns it.
func withoutBad[V any](s *fakeStore, prefix string, m map[core.JobKey]V) map[core.JobKey]V {
	for _, b := range s.bad {
		if strings.HasPrefix(b.Key, prefix) {
			delete(m, b.Job)
		}
	}
	return m
}

type statusFail struct {
	after int
	err   error
}
