// Package models holds what the scheduler assumes about deep-learning
// models: classes of placement sensitivity (Classes), shared by the
// simulator (which assigns a trace job's model to a class) and the live
// planner (which reads the model a job names in its stanza). Of finds a
// model's Class, with its slowdowns across machines of a rack and across
// racks.
//
// cv (the default) and nlp take the Themis paper's 1.1 and 1.3; cv-high
// (VGG, AlexNet) and speech take twice and half that penalty, our
// assumption after Tiresias's finding that spreading hurts high-skew
// models most.
// The table and its sources: docs/simulator.md, "Model classes".
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
