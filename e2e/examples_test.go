package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/nomad"
)

// The README's walk-through jobspecs parse with the nomad CLI (as `nomad job
// run` parses them) and their stanzas are valid to the planner.
func TestWalkthroughJobspecsAreValid(t *testing.T) {
	hello := []string{"-var", "hello_bin=" + env.helloBin}
	torch := []string{"-var", "pytorch_dir=" + env.pytorchDir}
	for _, c := range []struct {
		file, class string
		vars        []string
	}{
		{"train-be.nomad.hcl", "be", hello}, {"try-te.nomad.hcl", "te", hello}, {"hello.nomad.hcl", "be", hello},
		{"gang-16.nomad.hcl", "be", hello}, {"pytorch.nomad.hcl", "be", torch}, {"pytorch-gang.nomad.hcl", "be", torch},
		{"pytorch-docker.nomad.hcl", "be", nil},
	} {
		file := c.file
		args := append(append([]string{"job", "run", "-output"}, c.vars...), filepath.Join(env.root, "examples", "jobs", file))
		out, err := exec.Command(env.nomadBin, args...).Output()
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
		if string(j.Intent.Class) != c.class || j.Pool() != nomad.DefaultPendingPool {
			t.Errorf("%s: class %q pool %q", file, j.Intent.Class, j.Pool())
		}
	}
}

// The planner's service jobspec (docs/guide.md) parses with the nomad CLI,
// is not a themis job (the planner never holds it in the pending pool) and
// runs two planners on distinct hosts with the planner's arguments.
func TestPlannerJobspecIsValid(t *testing.T) {
	out, err := exec.Command(env.nomadBin, "job", "run", "-output", filepath.Join(env.root, "examples", "jobs", "themis-planner.nomad.hcl")).Output()
	if err != nil {
		t.Fatalf("nomad job run -output: %v: %s", err, stderrOf(err))
	}
	var wrapped struct{ Job *nomadapi.Job }
	if err := json.Unmarshal(out, &wrapped); err != nil || wrapped.Job == nil {
		t.Fatalf("decode: %v", err)
	}
	if _, err := nomad.ParseJob(wrapped.Job); !errors.Is(err, nomad.ErrNotThemis) {
		t.Errorf("the planner's job is taken for a themis job: %v", err)
	}
	j := wrapped.Job
	tg := j.TaskGroups[0]
	args := fmt.Sprint(tg.Tasks[0].Config["args"])
	if *j.NodePool != "default" || *tg.Count != 2 || !strings.Contains(args, "planner -id") || !strings.Contains(args, "-http-advertise") {
		t.Errorf("pool %s, count %d, args %s", *j.NodePool, *tg.Count, args)
	}
}
