package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Client reads the API (themis status, the e2e tests).
type Client struct {
	// Addr is the planner's API, e.g. http://127.0.0.1:4680.
	Addr string
	HTTP *http.Client
	// Token is the Nomad ACL token sent (X-Nomad-Token; docs/api.md,
	// "Access"); "" sends $NOMAD_TOKEN, if set.
	Token string
}

// ErrNotServed marks an address where no planner serves the API (nothing
// listens, it is not the API, or a standby that knows no leader answers):
// callers fall back to Consul.
var ErrNotServed = errors.New("the planner's HTTP API is not served there")

// Get fetches path into out. With index > 0 it is a blocking query (wait
// caps it). A standby's answer is followed, once, to the leader it names.
// It returns the answer's index.
func (c *Client) Get(ctx context.Context, path string, index uint64, wait time.Duration, out any) (uint64, error) {
	addr := strings.TrimRight(c.Addr, "/")
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	for hop := 0; ; hop++ {
		u, err := url.Parse(addr + path)
		if err != nil {
			return 0, err
		}
		if index > 0 {
			q := u.Query()
			q.Set("index", strconv.FormatUint(index, 10))
			if wait > 0 {
				q.Set("wait", wait.String())
			}
			u.RawQuery = q.Encode()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return 0, err
		}
		if tok := cmp.Or(c.Token, os.Getenv("NOMAD_TOKEN")); tok != "" {
			req.Header.Set("X-Nomad-Token", tok)
		}
		hc := c.HTTP
		if hc == nil {
			hc = http.DefaultClient
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrNotServed, err)
		}
		idx, _ := strconv.ParseUint(resp.Header.Get(IndexHeader), 10, 64)
		var body json.RawMessage
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			if next := resp.Header.Get(LeaderHeader); next != "" && hop == 0 {
				addr = strings.TrimRight(next, "/")
				continue
			}
		}
		if derr != nil || resp.Header.Get(IndexHeader) == "" && resp.StatusCode == http.StatusOK {
			return 0, fmt.Errorf("%w: GET %s: %s", ErrNotServed, u, resp.Status)
		}
		if resp.StatusCode != http.StatusOK {
			var e Error
			_ = json.Unmarshal(body, &e)
			err := fmt.Errorf("GET %s: %s: %s", u, resp.Status, e.Error)
			if resp.StatusCode == http.StatusServiceUnavailable {
				err = fmt.Errorf("%w: %w", ErrNotServed, err)
			}
			return idx, err
		}
		return idx, json.Unmarshal(body, out)
	}
}

// Queue reads /v1/queue.
func (c *Client) Queue(ctx context.Context) (QueueResponse, error) {
	var q QueueResponse
	_, err := c.Get(ctx, "/v1/queue", 0, 0, &q)
	return q, err
}
