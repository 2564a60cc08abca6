package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// The dashboard's assets are served from the binary; / and /ui go to it.
func TestUIAssets(t *testing.T) {
	_, ts := leader(t, fixture())
	for _, tc := range []struct{ path, ctype, has string }{
		{"/ui/", "text/html", `<div id="nodes"`},
		{"/ui/app.js", "javascript", "/v1/queue"},
		{"/ui/app.js", "javascript", "/v1/apps"},
		{"/ui/", "text/html", `<table id="apps"`},
		{"/ui/style.css", "text/css", ".gpu"},
	} {
		resp, err := http.Get(ts.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		_, _, body := get(t, ts, tc.path)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(body.(string), tc.has) {
			t.Errorf("GET %s: %d %s, want %s containing %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.ctype, tc.has)
		}
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/", "/ui"} {
		resp, err := c.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
			t.Errorf("GET %s: %d to %q, want a redirect to /ui/", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}
