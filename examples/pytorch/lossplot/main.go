// Command lossplot draws the loss curves the PyTorch e2e tests write (with
// THEMIS_PYTORCH_CURVES=DIR: DIR/single.csv, DIR/gang.csv) as one SVG: the
// run without a preemption, and the preempted run before and after its
// resume, with the preemption marked. The figure in docs/pytorch.md:
//
//	THEMIS_PYTORCH_CURVES=/tmp/curves THEMIS_AGENTS_DIR=$(e2e/agents/build.sh) \
//	  go test ./e2e -run 'TestPyTorchJobPreemptedResumesItsCurve|TestPyTorchGangOverGloo' -count=1
//	go run ./examples/pytorch/lossplot -out docs/pytorch-loss-curve.svg \
//	  "one job, 8 GPUs=/tmp/curves/single.csv" "a gang of 2 ranks over gloo, 16 GPUs=/tmp/curves/gang.csv"
//
// A CSV has a header "run,step,loss", rows of the runs "uninterrupted",
// "preempted" and "resumed", and one row "preemption,<step>," (the step
// the preempted run checkpointed at).
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func main() {
	out := flag.String("out", "docs/pytorch-loss-curve.svg", "the SVG (or, named .png, PNG) to write")
	smooth := flag.Int("smooth", 20, "also draw each run's moving mean over this many steps (0: none)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: lossplot [-out FILE] [-smooth N] [TITLE=]CURVES.csv...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, *smooth, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "lossplot:", err)
		os.Exit(1)
	}
}

// curves are one CSV's runs and the preemption step.
type curves struct {
	name       string
	runs       map[string]plotter.XYs
	preemption int
}

// read reads "TITLE=FILE" or FILE (titled by its name).
func read(arg string) (curves, error) {
	title, path, ok := strings.Cut(arg, "=")
	if !ok {
		title, path = strings.TrimSuffix(filepath.Base(arg), ".csv"), arg
	}
	f, err := os.Open(path)
	if err != nil {
		return curves{}, err
	}
	defer f.Close()
	return parse(title, f)
}

func parse(name string, r io.Reader) (curves, error) {
	c := curves{name: name, runs: map[string]plotter.XYs{}, preemption: -1}
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != "run,step,loss" {
		return c, fmt.Errorf("%s: want the header run,step,loss", name)
	}
	for i, row := range rows[1:] {
		step, err := strconv.Atoi(row[1])
		if err != nil {
			return c, fmt.Errorf("%s line %d: step %q: %w", name, i+2, row[1], err)
		}
		if row[0] == "preemption" {
			c.preemption = step
			continue
		}
		loss, err := strconv.ParseFloat(row[2], 64)
		if err != nil {
			return c, fmt.Errorf("%s line %d: loss %q: %w", name, i+2, row[2], err)
		}
		c.runs[row[0]] = append(c.runs[row[0]], plotter.XY{X: float64(step), Y: loss})
	}
	for _, want := range []string{"uninterrupted", "preempted", "resumed"} {
		if len(c.runs[want]) == 0 {
			return c, fmt.Errorf("%s: no %q run", name, want)
		}
	}
	if c.preemption < 0 {
		return c, fmt.Errorf("%s: no preemption row", name)
	}
	return c, nil
}

// movingMean is the mean of each point's last n points (fewer at the start).
func movingMean(xy plotter.XYs, n int) plotter.XYs {
	out := make(plotter.XYs, len(xy))
	sum := 0.0
	for i, p := range xy {
		sum += p.Y
		if i >= n {
			sum -= xy[i-n].Y
		}
		out[i] = plotter.XY{X: p.X, Y: sum / float64(min(i+1, n))}
	}
	return out
}

func panel(c curves, smooth int) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: preempted after step %d, resumed from its checkpoint", c.name, c.preemption)
	p.X.Label.Text = "step"
	p.Y.Label.Text = "training loss (cross-entropy, per batch)"
	p.Add(plotter.NewGrid())
	style := []struct {
		run   string
		label string
		col   color.RGBA
		width vg.Length
	}{
		{"uninterrupted", "never preempted", color.RGBA{R: 170, G: 170, B: 170, A: 255}, vg.Points(4)},
		{"preempted", "preempted run, before", color.RGBA{R: 31, G: 119, B: 180, A: 255}, vg.Points(1)},
		{"resumed", "the same job, resumed", color.RGBA{R: 214, G: 39, B: 40, A: 255}, vg.Points(1)},
	}
	// The preempted job's two runs are smoothed as one series, so that the
	// resumed run's first points average the steps before the preemption
	// too, as the uninterrupted run's do.
	job := movingMean(append(append(plotter.XYs{}, c.runs["preempted"]...), c.runs["resumed"]...), max(smooth, 1))
	smoothed := map[string]plotter.XYs{
		"uninterrupted": movingMean(c.runs["uninterrupted"], max(smooth, 1)),
		"preempted":     job[:len(c.runs["preempted"])],
		"resumed":       job[len(c.runs["preempted"]):],
	}
	for _, s := range style {
		xy := smoothed[s.run]
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color, l.LineStyle.Width = s.col, s.width
		p.Add(l)
		label := s.label
		if smooth > 1 {
			label += fmt.Sprintf(" (mean of %d steps)", smooth)
		}
		p.Legend.Add(label, l)
	}
	top := 0.0
	for _, xy := range c.runs {
		for _, pt := range xy {
			top = max(top, pt.Y)
		}
	}
	mark, err := plotter.NewLine(plotter.XYs{{X: float64(c.preemption), Y: 0}, {X: float64(c.preemption), Y: top}})
	if err != nil {
		return nil, err
	}
	mark.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	mark.LineStyle.Color = color.Black
	p.Add(mark)
	p.Legend.Add("preemption (checkpoint)", mark)
	p.Legend.Top = true
	p.Y.Min = 0
	return p, nil
}

func run(out string, smooth int, files []string) error {
	var ps []*plot.Plot
	for _, f := range files {
		c, err := read(f)
		if err != nil {
			return err
		}
		p, err := panel(c, smooth)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return errors.New("no curves")
	}
	w, h := 7*vg.Inch, vg.Length(len(ps))*4*vg.Inch
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if strings.HasSuffix(out, ".png") {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	} else {
		canvas = vgsvg.New(w, h)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(ps), Cols: 1, PadY: vg.Points(12)}
	grid := [][]*plot.Plot{}
	for _, p := range ps {
		grid = append(grid, []*plot.Plot{p})
	}
	for i, cs := range plot.Align(grid, tiles, dc) {
		grid[i][0].Draw(cs[0])
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
