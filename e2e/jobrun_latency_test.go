package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// How long a user waits from submitting a job that can run at once until
// they are told it runs, ten times each way on the suite's dev agent:
// `themis job run FILE` (to its "running:" line), and `nomad job run
// -detach FILE` followed by `nomad job status JOB` every 100 ms until an
// allocation shows running. The medians are logged (docs/guide.md's
// figure); nothing is asserted about them. THEMIS_E2E_SLOW=1 (make
// test-slow TEST=TestJobRunLatency).
func TestJobRunLatency(t *testing.T) {
	slow(t)
	const runs = 10
	cmdEnv := append(os.Environ(), "NOMAD_ADDR="+env.stack.NomadAddr(), "THEMIS_ADDR="+env.apiURL)
	free := func(id string) {
		_, _, _ = env.nomad.Jobs().Deregister(id, true, nil)
		eventually(t, 60*time.Second, id+"'s lease released", func() (bool, error) { return jobLease(t, id) == nil, nil })
	}
	var themis, nomad []time.Duration
	for i := range runs {
		id := fmt.Sprintf("e2e-latency-themis-%d", i)
		file := helloFile(t, id, `default = 300`, `default = 3000`)
		cmd := exec.Command(env.themis, "job", "run", "-var", "hello_bin="+env.helloBin, file)
		cmd.Env = cmdEnv
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var took time.Duration
		var lines []string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), ": running: ") {
				took = time.Since(start)
			}
		}
		if i == 0 {
			t.Logf("themis job run:\n%s", strings.Join(lines, "\n"))
		}
		if err := cmd.Wait(); err != nil || took == 0 {
			t.Fatalf("themis job run %s: %v, running seen after %s", id, err, took)
		}
		themis = append(themis, took)
		free(id)

		id = fmt.Sprintf("e2e-latency-nomad-%d", i)
		file = helloFile(t, id, `default = 300`, `default = 3000`)
		start = time.Now()
		run := exec.Command(env.nomadBin, "job", "run", "-detach", "-var", "hello_bin="+env.helloBin, file)
		run.Env = cmdEnv
		if b, err := run.CombinedOutput(); err != nil {
			t.Fatalf("nomad job run -detach: %v\n%s", err, b)
		}
		for {
			st := exec.Command(env.nomadBin, "job", "status", id)
			st.Env = cmdEnv
			b, _ := st.Output()
			if allocRunning(string(b)) {
				break
			}
			if time.Since(start) > 2*time.Minute {
				t.Fatalf("%s never showed a running allocation:\n%s", id, b)
			}
			time.Sleep(100 * time.Millisecond)
		}
		nomad = append(nomad, time.Since(start))
		free(id)
	}
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	t.Logf("submit -> running, %d runs: themis job run: median %s (%v); nomad job run -detach + nomad job status every 100 ms: median %s (%v)",
		runs, med(themis).Round(time.Millisecond), round(themis), med(nomad).Round(time.Millisecond), round(nomad))
}

// allocRunning reports whether `nomad job status` lists a running
// allocation.
func allocRunning(status string) bool {
	_, allocs, ok := strings.Cut(status, "\nAllocations\n")
	if !ok {
		return false
	}
	for _, l := range strings.Split(allocs, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) >= 6 && f[4] == "run" && f[5] == "running" {
			return true
		}
	}
	return false
}

func round(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}
