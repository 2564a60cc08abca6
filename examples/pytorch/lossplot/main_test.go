package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

func TestParse(t *testing.T) {
	good := "run,step,loss\nuninterrupted,1,2.3\nuninterrupted,2,2.1\npreempted,1,2.3\nresumed,2,2.1\npreemption,1,\n"
	cases := []struct {
		name, in, err string
	}{
		{"good", good, ""},
		{"no header", "x,y,z\n", "want the header"},
		{"bad step", "run,step,loss\nuninterrupted,x,1\n", `step "x"`},
		{"bad loss", "run,step,loss\nuninterrupted,1,x\n", `loss "x"`},
		{"no resumed run", "run,step,loss\nuninterrupted,1,2\npreempted,1,2\npreemption,1,\n", `no "resumed" run`},
		{"no preemption", strings.Replace(good, "preemption,1,\n", "", 1), "no preemption row"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parse("x", strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.preemption != 1 || len(got.runs["uninterrupted"]) != 2 || got.runs["resumed"][0].Y != 2.1 {
				t.Fatalf("parsed %+v", got)
			}
		})
	}
}

func TestMovingMean(t *testing.T) {
	got := movingMean(plotter.XYs{{X: 1, Y: 1}, {X: 2, Y: 3}, {X: 3, Y: 5}, {X: 4, Y: 7}}, 2)
	want := []float64{1, 2, 4, 6}
	for i, w := range want {
		if got[i].Y != w {
			t.Fatalf("point %d: %v, want %v", i, got[i].Y, w)
		}
	}
}

func TestRunWritesAnSVG(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "single.csv")
	csv := "run,step,loss\n"
	for i := 1; i <= 50; i++ {
		for _, r := range []string{"uninterrupted", map[bool]string{true: "preempted", false: "resumed"}[i <= 20]} {
			csv += r + "," + strconv.Itoa(i) + ",1.5\n"
		}
	}
	csv += "preemption,20,\n"
	if err := os.WriteFile(in, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.svg")
	if err := run(out, 5, []string{in}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "preempted after step 20") {
		t.Fatalf("not the plot: %.300s", b)
	}
}
