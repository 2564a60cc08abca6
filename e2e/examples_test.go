package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/nomad"
)

// The README's walk-through jobspecs parse with the nomad CLI (as `nomad job
// run` parses them) and their stanzas are valid to the planner.
func TestWalkthroughJobspecsAreValid(t *testing.T) {
	for file, class := range map[string]string{"train-be.nomad.hcl": "be", "try-te.nomad.hcl": "te", "hello.nomad.hcl": "be", "gang-16.nomad.hcl": "be"} {
		out, err := exec.Command(env.nomadBin, "job", "run", "-output", "-var", "hello_bin="+env.helloBin,
			filepath.Join(env.root, "examples", "jobs", file)).Output()
		if err != nil {
			t.Fatalf("%s: nomad job run -output: %v: %s", file, err, stderrOf(err))
		}
		var wrapped struct{ Job *nomadapi.Job }
		if err := json.Unmarshal(out, &wrapped); err != nil || wrapped.Job == nil {
			t.Fatalf("%s: decode: %v", file, err)
		}
		j, err := nomad.ParseJob(wrapped.Job)
		if err != nil || j.Err != nil {
			t.Fatalf("%s: %v %v", file, err, j.Err)
		}
		if string(j.Intent.Class) != class || j.Pool() != nomad.DefaultPendingPool {
			t.Errorf("%s: class %q pool %q", file, j.Intent.Class, j.Pool())
		}
	}
}
