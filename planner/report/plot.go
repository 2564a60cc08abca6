package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/themis-nomad/themis/planner/sim"
)

// maxPlotPoints bounds the points of one plotted line, so that plots of long
// runs stay small.
const maxPlotPoints = 2000

const (
	plotWidth  = 6 * vg.Inch
	plotHeight = 4 * vg.Inch
)

// series is one named line of a plot.
type series struct {
	name string
	xy   plotter.XYs
}

// cdfPoints is the empirical CDF of values as points for a post-step line:
// (x[0], 0), then (x[i], (i+1)/n). With more than maxPlotPoints values it
// keeps maxPlotPoints-1 evenly spaced quantiles (nearest-rank) instead.
func cdfPoints(values []float64) plotter.XYs {
	x := sortedCopy(values)
	n := len(x)
	if n == 0 {
		return nil
	}
	pts := plotter.XYs{{X: x[0], Y: 0}}
	if n < maxPlotPoints {
		for i, v := range x {
			pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / float64(n)})
		}
		return pts
	}
	m := maxPlotPoints - 1
	for k := 1; k <= m; k++ {
		rank := (k*n + m - 1) / m // ceil(k/m * n)
		pts = append(pts, plotter.XY{X: x[rank-1], Y: float64(k) / float64(m)})
	}
	return pts
}

// utilPoints is the busy-GPU step function over [0, horizon] as points for a
// post-step line, ending in a point at horizon. With more than
// maxPlotPoints steps it plots the time-weighted mean of busy GPUs over
// maxPlotPoints/2 equal windows instead, which keeps the area (GPU time).
func utilPoints(util []sim.UtilSample, horizon float64) plotter.XYs {
	s := sortedUtil(util)
	if len(s) == 0 || !(horizon > 0) {
		return nil
	}
	var pts plotter.XYs
	for i, u := range s {
		if u.T >= horizon {
			break
		}
		t := max(u.T, 0)
		if i+1 < len(s) && s[i+1].T <= t {
			continue // a later sample takes over at once
		}
		pts = append(pts, plotter.XY{X: t, Y: float64(u.Busy)})
	}
	if len(pts) == 0 {
		return nil
	}
	if len(pts) >= maxPlotPoints {
		pts = windowMeans(pts, horizon, maxPlotPoints/2)
	}
	return append(pts, plotter.XY{X: horizon, Y: pts[len(pts)-1].Y})
}

// windowMeans averages the step function steps (each step holds until the
// next, the last until horizon) over n equal windows of [0, horizon]. The
// result has one point per window, at its start.
func windowMeans(steps plotter.XYs, horizon float64, n int) plotter.XYs {
	w := horizon / float64(n)
	area := make([]float64, n)
	for i, st := range steps {
		from, to := st.X, horizon
		if i+1 < len(steps) {
			to = steps[i+1].X
		}
		// Walk the windows the step overlaps; k only moves forward, so
		// rounding at a window edge cannot stall the walk.
		for k := min(int(from/w), n-1); from < to; k++ {
			end := to
			if k < n-1 {
				end = min(to, float64(k+1)*w)
			}
			if end > from {
				area[k] += st.Y * (end - from)
				from = end
			}
		}
	}
	out := make(plotter.XYs, n)
	for k := range out {
		out[k] = plotter.XY{X: float64(k) * w, Y: area[k] / w}
	}
	return out
}

// timeAxis picks the unit of a time axis whose largest value is maxSeconds.
func timeAxis(maxSeconds float64) (div float64, unit string) {
	if maxSeconds >= 3*3600 {
		return 3600, "h"
	}
	return 1, "s"
}

// scaled divides the X values of pts by div.
func scaled(pts plotter.XYs, div float64) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	for i, p := range pts {
		out[i] = plotter.XY{X: p.X / div, Y: p.Y}
	}
	return out
}

// writeCDF plots one CDF line per series (in order) to an SVG file. The x
// axis is logarithmic when logX is set and every value is positive and they
// span at least a factor of 10.
func writeCDF(path, title, xlabel string, ss []series, logX bool) error {
	return writeCDFAxis(path, title, xlabel, ss, logX, true)
}

// writeCDFAxis is writeCDF with the x axis in seconds (timed: scaled to a
// readable unit) or a plain number.
func writeCDFAxis(path, title, xlabel string, ss []series, logX, timed bool) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "fraction of finished jobs"
	p.Y.Min, p.Y.Max = 0, 1

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, pt := range s.xy {
			lo, hi = min(lo, pt.X), max(hi, pt.X)
		}
	}
	div := 1.0
	p.X.Label.Text = xlabel
	if timed {
		var unit string
		div, unit = timeAxis(hi)
		p.X.Label.Text = fmt.Sprintf("%s (%s)", xlabel, unit)
	}
	if logX && lo > 0 && hi >= 10*lo {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if math.IsInf(lo, 1) {
		p.Title.Text += " (no finished jobs)"
	}

	p.Legend.Top = false
	p.Legend.Left = false
	for i, s := range ss {
		if len(s.xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(scaled(s.xy, div))
		if err != nil {
			return fmt.Errorf("plot %q line %q: %w", path, s.name, err)
		}
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		if len(ss) > 1 {
			p.Legend.Add(s.name, l)
		}
	}
	p.Legend.YOffs = vg.Points(20) // above the bottom, clear of the x axis
	p.Add(plotter.NewGrid())
	return savePlot(p, path)
}

// writeUtil plots busy GPUs over time as a step line, with the cluster's
// capacity as a dashed line.
func writeUtil(path string, r sim.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Busy GPUs: %s", r.Policy)
	p.Y.Label.Text = "busy GPUs"
	p.Y.Min = 0
	if r.TotalGPUs > 0 {
		p.Y.Max = float64(r.TotalGPUs) * 1.05
	}

	pts := utilPoints(r.Util, r.Makespan)
	div, unit := timeAxis(r.Makespan)
	p.X.Label.Text = fmt.Sprintf("time (%s)", unit)
	p.X.Min = 0
	if r.Makespan > 0 {
		p.X.Max = r.Makespan / div
	}
	p.Add(plotter.NewGrid())
	if len(pts) > 0 {
		l, err := plotter.NewLine(scaled(pts, div))
		if err != nil {
			return fmt.Errorf("plot %q: %w", path, err)
		}
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(0)
		l.Width = vg.Points(1)
		p.Add(l)
	} else {
		p.Title.Text += " (no samples)"
	}
	if r.TotalGPUs > 0 && r.Makespan > 0 {
		capLine, err := plotter.NewLine(plotter.XYs{
			{X: 0, Y: float64(r.TotalGPUs)},
			{X: r.Makespan / div, Y: float64(r.TotalGPUs)},
		})
		if err != nil {
			return fmt.Errorf("plot %q: %w", path, err)
		}
		capLine.Color = color.Gray{Y: 100}
		capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(capLine)
		p.Legend.Add(fmt.Sprintf("capacity (%d GPUs)", r.TotalGPUs), capLine)
		p.Legend.Top = true
		p.Legend.YOffs = -vg.Points(12) // below the capacity line
	}
	return savePlot(p, path)
}

// savePlot renders p as SVG (fonts referenced, not embedded) to path.
func savePlot(p *plot.Plot, path string) error {
	c := vgsvg.New(plotWidth, plotHeight)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("render %q: %w", path, err)
	}
	return writeFile(path, buf.Bytes())
}

// writeFile writes data to path, with context on error.
func writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}
