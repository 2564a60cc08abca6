package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
)

// Placement sensitivity. The Themis paper (NSDI'20, section 6) models a
// job's slowdown by where its GPUs are: 1.0 on one machine, 1.1 across
// machines, 1.3 across racks. Tiresias (NSDI'19, section 3.3) shows that
// sensitivity depends on the model's skew: VGG and AlexNet (large dense
// layers) slow down far more when spread than ResNet or Inception. We scale
// the Themis penalties per model class:
//
//	class   examples                     across machines  across racks
//	cv-high vgg*, alexnet                1.2              1.6
//	cv      resnet*, inception*, other   1.1              1.3
//	nlp     lstm, transformer, bert, ... 1.1              1.3
//	speech  deepspeech, ...              1.05             1.15
//
// The numbers for cv-high and speech are our assumption (twice and half the
// Themis penalty), not measurements.
type modelClass struct {
	name       string
	crossNode  float64
	crossRack  float64
	examples   []string
	traceNames []string // substrings of trace model names in this class
}

var classes = []modelClass{
	{name: "cv-high", crossNode: 1.2, crossRack: 1.6, examples: []string{"vgg16", "vgg19", "alexnet"}, traceNames: []string{"vgg", "alexnet"}},
	{name: "cv", crossNode: 1.1, crossRack: 1.3, examples: []string{"resnet50", "inception3"}, traceNames: []string{"resnet", "inception", "googlenet"}},
	{name: "nlp", crossNode: 1.1, crossRack: 1.3, examples: []string{"lstm", "transformer"}, traceNames: []string{"lstm", "transformer", "bert", "gnmt", "nlp"}},
	{name: "speech", crossNode: 1.05, crossRack: 1.15, examples: []string{"deepspeech"}, traceNames: []string{"speech", "deepspeech"}},
}

// classOf finds the class of a model name from a trace; unknown names are
// treated as "cv" (the Themis default penalties).
func classOf(model string) modelClass {
	m := strings.ToLower(model)
	for _, c := range classes {
		for _, n := range c.traceNames {
			if strings.Contains(m, n) {
				return c
			}
		}
	}
	return classes[1]
}

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
		c := classes[1]
		if rng.IntN(3) == 0 {
			c = classes[0]
		}
		return c.examples[rng.IntN(len(c.examples))]
	case x < 0.7:
		return classes[2].examples[rng.IntN(len(classes[2].examples))]
	default:
		return classes[3].examples[0]
	}
}
