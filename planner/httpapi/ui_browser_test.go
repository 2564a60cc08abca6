package httpapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/e2e/browser"
)

// The dashboard in a real (headless) browser: the GPU grid is coloured by
// job, the revoking and unhealthy GPUs are marked, the queue and the
// decisions are listed, and the apps of the last auction round. (#once draws once: the live loop's blocking
// queries would keep the headless browser's virtual clock from running.)
func TestUIInBrowser(t *testing.T) {
	b := browser.Find(t)
	_, ts := leader(t, themisFixture())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := b.DOM(ctx, ts.URL+"/ui/#once", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`data-gpu="gpu-0" data-state="leased" data-job="default/a" style="background: rgb(`,
		`data-gpu="gpu-2" data-state="revoking" data-job="default/b" style="background: rgb(`,
		`class="gpu revoking"`,
		`class="gpu unhealthy"`,
		`data-node="spare-node"`,
		`<tr data-job="default/c"><td>—</td><td>1</td>`,
		`waiting for default/b to stop`,
		`<tr data-kind="preempt">`,
		`p1 (leader) · themis`,
		`<tr data-app="a"><td>a</td><td>3.500</td><td>yes</td><td>2</td><td>1.250</td><td>machine (c 1.00)</td>`,
		`<tr data-app="c"><td>c</td><td>2.750</td><td>yes</td><td></td>`,
		`round 4 at `,
		`<tr data-job="default/crash" data-state="failed"><td>default/crash</td><td class="state-failed">failed</td>`,
		`Driver Failure: failed to launch command with executor: permission denied`,
		`<tr data-job="default/bad" data-state="rejected">`,
		`1 failed · 1 granted · 1 rejected · 1 revoking · 1 suspended · 1 waiting`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}
