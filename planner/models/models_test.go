package models

import "testing"

func TestOf(t *testing.T) {
	for model, want := range map[string]string{
		"vgg16": "cv-high", "AlexNet": "cv-high", "resnet50": "cv", "": "cv", "unknown-net": "cv",
		"bert-large": "nlp", "transformer": "nlp", "deepspeech2": "speech", "speech": "speech",
		"cv-high": "cv-high", " nlp ": "nlp",
	} {
		if got := Of(model).Name; got != want {
			t.Errorf("Of(%q) = %s, want %s", model, got, want)
		}
	}
	for _, c := range Classes {
		if c.CrossNode < 1 || c.CrossRack < c.CrossNode {
			t.Errorf("class %s: slowdowns %g, %g: want 1 <= across machines <= across racks", c.Name, c.CrossNode, c.CrossRack)
		}
	}
}
