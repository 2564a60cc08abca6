package e2e

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/httpapi"
)

// The planner's HTTP API against the real agents: a granted job is in
// /v1/leases and holds its GPUs in /v1/nodes; a blocking query on
// /v1/queue returns when a job queues behind it (before its wait passes),
// with the job's position and reason; /v1/jobs and /v1/decisions say the
// same, and so does the metrics scrape.
func TestAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 2*time.Minute)
	defer cancel()
	c := &httpapi.Client{Addr: env.apiURL}
	big, small := "e2e-api-big", "e2e-api-small"

	trainJob{gpus: 8, shell: "sleep 600"}.run(t, big)
	var leases httpapi.LeasesResponse
	var index uint64
	eventually(t, 60*time.Second, big+" leased in /v1/leases", func() (bool, error) {
		var err error
		index, err = c.Get(ctx, "/v1/leases", 0, 0, &leases)
		return slices.ContainsFunc(leases.Leases, func(l httpapi.Lease) bool { return l.JobID == big }), err
	})
	var l httpapi.Lease
	for _, x := range leases.Leases {
		if x.JobID == big {
			l = x
		}
	}
	if l.State != httpapi.LeaseActive || len(l.GPUs) != 8 || l.NodeName != "dev-node" || l.Job != "default/"+big {
		t.Fatalf("lease %+v", l)
	}
	var nodes httpapi.NodesResponse
	if _, err := c.Get(ctx, "/v1/nodes", 0, 0, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].Name != "dev-node" || nodes.Nodes[0].Leased != 8 {
		t.Fatalf("nodes %+v", nodes.Nodes)
	}
	for _, g := range nodes.Nodes[0].GPUs {
		if g.State != httpapi.GPULeased || g.Job != "default/"+big || g.LeaseID != l.LeaseID || !slices.Contains(l.GPUs, g.ID) {
			t.Errorf("GPU %+v: want leased to %s under %s", g, big, l.LeaseID)
		}
	}

	// Block on the queue at the current index, then queue a job.
	type answer struct {
		q     httpapi.QueueResponse
		index uint64
		took  time.Duration
		err   error
	}
	const wait = 60 * time.Second
	answers := make(chan answer, 1)
	block := func(at uint64) {
		go func() {
			var a answer
			start := time.Now()
			a.index, a.err = c.Get(ctx, "/v1/queue", at, wait, &a.q)
			a.took = time.Since(start)
			answers <- a
		}()
	}
	_, err := c.Get(ctx, "/v1/queue", 0, 0, new(httpapi.QueueResponse))
	if err != nil {
		t.Fatal(err)
	}
	index = env.api.Index()
	block(index)
	time.Sleep(200 * time.Millisecond)
	select {
	case a := <-answers:
		// Another change (e.g. the big job's allocation starting) may
		// wake it; then it must carry a newer index.
		if a.err != nil || a.index <= index {
			t.Fatalf("the blocking query returned before any change: index %d after %d, err %v", a.index, index, a.err)
		}
		index = a.index
		block(index)
	default:
	}
	trainJob{gpus: 2, steps: 10}.run(t, small)
	var queued *httpapi.Queued
	for queued == nil {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.took >= wait || a.index <= index {
			t.Fatalf("the blocking query waited %s and returned index %d after %d: want it woken by a change", a.took, a.index, index)
		}
		for _, vc := range a.q.VCs {
			for i := range vc.Jobs {
				if vc.Jobs[i].JobID == small {
					queued = &vc.Jobs[i]
				}
			}
		}
		t.Logf("the blocking query returned after %s with index %d (asked %d)", a.took.Round(time.Millisecond), a.index, index)
		index = a.index
		if queued == nil {
			block(index)
		}
	}
	if queued.Position != 1 || queued.State != "queued" || queued.GPUs != 2 || !strings.Contains(queued.Reason, "free GPUs") {
		t.Errorf("queued %+v: want position 1, waiting for free GPUs", queued)
	}

	var job httpapi.Job
	if _, err := c.Get(ctx, "/v1/jobs/default/"+small, 0, 0, &job); err != nil {
		t.Fatal(err)
	}
	if job.State != "queued" || job.Queue == nil || job.Queue.Position != 1 || job.Request == nil || job.Request.GPUs != 2 || job.Lease != nil {
		t.Errorf("job %+v", job)
	}
	// The scrape agrees: 8 GPUs leased on dev-node, one job waiting.
	eventually(t, 20*time.Second, "the metrics", func() (bool, error) {
		m, err := httpGet(ctx, env.apiURL+"/metrics")
		return err == nil && strings.Contains(m.body, `themis_gpus{node="dev-node",state="leased",vc="default"} 8`) &&
			strings.Contains(m.body, `themis_queue_length{vc=""} 1`) && strings.Contains(m.body, "themis_leader 1") &&
			strings.Contains(m.body, "themis_rounds_skipped_total ") &&
			!strings.Contains(m.body, `themis_decisions_total{kind="grant"} 0`), err
	})

	var ds httpapi.DecisionsResponse
	if _, err := c.Get(ctx, "/v1/decisions?job=default/"+big, 0, 0, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Decisions) == 0 || ds.Decisions[0].Kind != "grant" || ds.Decisions[0].LeaseID != l.LeaseID {
		t.Errorf("decisions for %s: %+v, want its grant", big, ds.Decisions)
	}
}

type httpAnswer struct {
	code   int
	header http.Header
	body   string
}

// httpGet is a plain GET, for answers httpapi.Client interprets.
func httpGet(ctx context.Context, url string) (httpAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return httpAnswer{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return httpAnswer{code: resp.StatusCode, header: resp.Header, body: string(b)}, err
}
