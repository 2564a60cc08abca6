package nomadread

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// Every ID is sent escaped so that Nomad's router sees no "/" of it and no
// dot segment: the path the API client puts on the wire, decoded, is
// /v1/job/ and the ID, and its escaped form holds neither.
func TestPathEscapesEveryID(t *testing.T) {
	for _, id := range []string{"hello", "wedge/allocations", "..", ".", "x/..", "a//b", "p%2Fq", "q?x#y", "t/tag", "e\x1b[2J", "ünï", "a b"} {
		p := Path(id)
		u, err := url.Parse(p)
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if got := strings.TrimPrefix(u.Path, "/v1/job/"); got != id {
			t.Errorf("%q: the path decodes to ID %q", id, got)
		}
		raw := strings.TrimPrefix(u.EscapedPath(), "/v1/job/")
		if strings.ContainsAny(raw, "/.?#") {
			t.Errorf("%q: escaped as %q, which Nomad's router could split or clean", id, raw)
		}
	}
}

// What the reader makes of Nomad's answers, on the wire through the real
// API client: the job asked for, read from its versions when its ID has a
// "/"; gone on 404; set aside (Unreadable) on an answer about the job that
// is an error, does not decode, or names another job; refusals and an
// unreachable Nomad returned as they are.
func TestJobAnswers(t *testing.T) {
	job := `{"ID":%q,"Namespace":"default","JobModifyIndex":7}`
	cases := []struct {
		name, id string
		status   int
		body     string
		want     string // the path asked for
		check    func(*api.Job, error) error
	}{
		{"plain", "hello", 200, sprintf(job, "hello"), "/v1/job/hello", wantJob("hello")},
		{"a / reads the versions", "wedge/allocations", 200, `{"Versions":[` + sprintf(job, "wedge/allocations") + `]}`,
			"/v1/job/wedge%2Fallocations/versions", wantJob("wedge/allocations")},
		{"dots escaped", "..", 200, sprintf(job, ".."), "/v1/job/%2E%2E", wantJob("..")},
		{"gone", "x", 404, "job not found", "/v1/job/x", wantErr(ErrGone)},
		{"no versions", "x/y", 200, `{"Versions":[]}`, "/v1/job/x%2Fy/versions", wantErr(ErrGone)},
		{"an array comes back", "x", 200, `[]`, "/v1/job/x", wantUnreadable("cannot unmarshal array")},
		{"another job comes back", "x", 200, sprintf(job, "y"), "/v1/job/x", wantUnreadable(`Nomad answered with job "y"`)},
		{"Nomad fails on it", "x", 500, "boom", "/v1/job/x", wantUnreadable("500")},
		{"refused", "x", 403, "Permission denied", "/v1/job/x", func(_ *api.Job, err error) error {
			var u *Unreadable
			if err == nil || errors.As(err, &u) || errors.Is(err, ErrGone) {
				return errors.New("want the refusal itself")
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked = r.URL.EscapedPath()
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := api.NewClient(&api.Config{Address: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			j, err := Job(context.Background(), c, "default", tc.id)
			if asked != tc.want {
				t.Errorf("asked for %s, want %s", asked, tc.want)
			}
			if err := tc.check(j, err); err != nil {
				t.Errorf("%v (got job %v, error %v)", err, j, err)
			}
		})
	}
	// Nomad unreachable: every read fails alike, not this job's.
	c, _ := api.NewClient(&api.Config{Address: "http://127.0.0.1:1"})
	_, err := Job(context.Background(), c, "default", "x")
	var u *Unreadable
	if err == nil || errors.As(err, &u) {
		t.Errorf("unreachable Nomad: %v, want the transport error", err)
	}
}

func sprintf(f, id string) string { return strings.Replace(f, "%q", `"`+id+`"`, 1) }

func wantJob(id string) func(*api.Job, error) error {
	return func(j *api.Job, err error) error {
		if err != nil || j == nil || *j.ID != id {
			return errors.New("want job " + id)
		}
		return nil
	}
}

func wantErr(target error) func(*api.Job, error) error {
	return func(_ *api.Job, err error) error {
		if !errors.Is(err, target) {
			return errors.New("want " + target.Error())
		}
		return nil
	}
}

func wantUnreadable(sub string) func(*api.Job, error) error {
	return func(_ *api.Job, err error) error {
		var u *Unreadable
		if !errors.As(err, &u) || !strings.Contains(err.Error(), sub) {
			return errors.New("want Unreadable naming " + sub)
		}
		return nil
	}
}
