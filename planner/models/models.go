// Package models holds what the scheduler assumes about deep-learning
// models: classes of placement sensitivity, shared by the simulator (which
// assigns a trace job's model to a class) and the live planner (which reads
// the model a job names in its stanza).
//
// The Themis paper (NSDI'20, section 6) models a job's slowdown by where its
// GPUs are: 1.0 on one machine, 1.1 across machines, 1.3 across racks.
// Tiresias (NSDI'19, section 3.3) shows that sensitivity depends on the
// model's skew: VGG and AlexNet (large dense layers) slow down far more when
// spread than ResNet or Inception. We scale the Themis penalties per class:
//
//	class   examples                     across machines  across racks
//	cv-high vgg*, alexnet                1.2              1.6
//	cv      resnet*, inception*, other   1.1              1.3
//	nlp     lstm, transformer, bert, ... 1.1              1.3
//	speech  deepspeech, ...              1.05             1.15
//
// The numbers for cv-high and speech are our assumption (twice and half the
// Themis penalty), not measurements.
package models

import "strings"

// Class is a placement-sensitivity class of models.
type Class struct {
	Name string
	// CrossNode and CrossRack are the slowdowns when a job's GPUs span
	// machines of one rack, and racks.
	CrossNode, CrossRack float64
	// Examples are model names of the class; Names are the substrings of
	// model names that belong to it.
	Examples, Names []string
}

// Classes are the classes, the default ("cv") second.
var Classes = []Class{
	{Name: "cv-high", CrossNode: 1.2, CrossRack: 1.6, Examples: []string{"vgg16", "vgg19", "alexnet"}, Names: []string{"vgg", "alexnet"}},
	{Name: "cv", CrossNode: 1.1, CrossRack: 1.3, Examples: []string{"resnet50", "inception3"}, Names: []string{"resnet", "inception", "googlenet"}},
	{Name: "nlp", CrossNode: 1.1, CrossRack: 1.3, Examples: []string{"lstm", "transformer"}, Names: []string{"lstm", "transformer", "bert", "gnmt", "nlp"}},
	{Name: "speech", CrossNode: 1.05, CrossRack: 1.15, Examples: []string{"deepspeech"}, Names: []string{"speech", "deepspeech"}},
}

// Default is the class of a model nobody named: the Themis paper's
// penalties.
func Default() Class { return Classes[1] }

// Of finds the class of a model name (case-insensitive substring match of
// the class's names, or the class's own name); unknown names are Default.
func Of(model string) Class {
	m := strings.ToLower(strings.TrimSpace(model))
	for _, c := range Classes {
		if m == c.Name {
			return c
		}
	}
	for _, c := range Classes {
		for _, n := range c.Names {
			if strings.Contains(m, n) {
				return c
			}
		}
	}
	return Default()
}
