package driver

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestGangRankCannotAdoptAnotherJobsUID: a gang's rank above 0 runs as the
// uid rank 0 published in the rendezvous, which any node's Consul token
// can write. A record naming a uid another job's allocation holds (claimed
// in the shared checkpoint root) must not make a rank run as that uid:
// it would read that job's checkpoints and signal its processes. Ranks of
// the same job still share rank 0's. Before: the rank joined any claimed
// uid.
func TestGangRankCannotAdoptAnotherJobsUID(t *testing.T) {
	e := prodEnv(t, nil, nil)
	root, err := openCheckpointRoot(e.ckptDir)
	must.NoError(t, err)
	defer root.Close()
	victim := holder{Alloc: "victim-alloc", Task: "train", Dir: []string{"default", "victim-job", "train", "train"}}
	uid, err := e.d.ids.acquire(root, 91300, 91309, victim, -1)
	must.NoError(t, err)

	cases := []struct {
		name string
		h    holder
		want string // "" for joined
	}{
		{"another job", holder{Alloc: "gang-alloc-1", Task: "train", Dir: []string{"default", "gang-job", "train", "train"}},
			`is held by allocation victim-alloc of job "default/victim-job", not by job "default/gang-job"`},
		{"same job name, another namespace", holder{Alloc: "gang-alloc-2", Task: "train", Dir: []string{"other", "victim-job", "train", "train"}},
			`not by job "other/victim-job"`},
		{"the same job", holder{Alloc: "victim-alloc-rank1", Task: "train", Dir: []string{"default", "victim-job", "train", "train"}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := e.d.ids.join(root, uid, c.h)
			if c.want == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorContains(t, err, c.want)
		})
	}
	// A uid no one holds is no rank 0's either.
	must.ErrorContains(t, e.d.ids.join(root, 91399, holder{Alloc: "x", Task: "t", Dir: []string{"default", "gang-job", "train", "train"}}), "its claim is gone")
}
