package sim

import (
	"hash/fnv"
	"math/rand/v2"

	"github.com/themis-nomad/themis/planner/models"
)

// A trace job's model class (placement sensitivity) comes from
// planner/models, which the live planner shares.

// modelRNG is a job's own random stream for its model: a function of the
// run's seed and the job's ID alone, so that a job gets the same model
// whichever other jobs the trace holds (RunVCs replays a VC's jobs alone).
func modelRNG(seed int64, id string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(id))
	return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
}

// assignModel draws a model for a job whose trace has none, with the Themis
// paper's mix (Table 4): 10% computer vision, 60% language, 30% speech; a
// third of the vision jobs are high-skew models (VGG, AlexNet).
func assignModel(rng *rand.Rand) string {
	x := rng.Float64()
	switch {
	case x < 0.1:
		c := models.Classes[1]
		if rng.IntN(3) == 0 {
			c = models.Classes[0]
		}
		return c.Examples[rng.IntN(len(c.Examples))]
	case x < 0.7:
		return models.Classes[2].Examples[rng.IntN(len(models.Classes[2].Examples))]
	default:
		return models.Classes[3].Examples[0]
	}
}
