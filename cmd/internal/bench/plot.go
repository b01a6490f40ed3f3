package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotCDF writes two panels to path (.png or .svg): the CDF of lateness and
// wake latency up to their p99.9, and the tail (fraction later than x, log
// scale) over the whole range.
func plotCDF(path, title string, lateness []int64, wake []float64) error {
	format := strings.TrimPrefix(filepath.Ext(path), ".")
	if format != "png" && format != "svg" {
		return fmt.Errorf("bench: --plot %q must end in .png or .svg", path)
	}
	late := make([]float64, len(lateness))
	for i, l := range lateness {
		late[i] = float64(l)
	}
	series := []struct {
		name  string
		data  []float64 // sorted
		color color.Color
	}{
		{"lateness: fired - due (server clock, every timer)", late, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{fmt.Sprintf("wake: due -> Wait returns (%d sampled waiters)", len(wake)), wake, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	}

	cdf := plot.New()
	cdf.Title.Text = title
	cdf.X.Label.Text = "ms after due"
	cdf.Y.Label.Text = "fraction with at most x"
	cdf.Y.Min, cdf.Y.Max = 0, 1
	tail := plot.New()
	tail.Title.Text = "tail (log scale)"
	tail.X.Label.Text = "ms after due"
	tail.Y.Label.Text = "fraction later than x"
	tail.Y.Scale = plot.LogScale{}
	tail.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	xmax := 1.0
	for _, s := range series {
		xmax = max(xmax, pct(s.data, 0.999)*1.2)
	}
	for _, s := range series {
		if len(s.data) == 0 {
			continue
		}
		n := float64(len(s.data))
		var up, down plotter.XYs
		for i, v := range s.data {
			if i+1 < len(s.data) && s.data[i+1] == v {
				continue // one point per distinct value
			}
			up = append(up, plotter.XY{X: v, Y: float64(i+1) / n})
			if later := (n - float64(i+1)) / n; later > 0 {
				down = append(down, plotter.XY{X: v, Y: later})
			}
		}
		for _, pl := range []struct {
			p   *plot.Plot
			pts plotter.XYs
		}{{cdf, up}, {tail, down}} {
			if len(pl.pts) == 0 {
				continue
			}
			l, err := plotter.NewLine(pl.pts)
			if err != nil {
				return fmt.Errorf("bench: plot: %w", err)
			}
			l.StepStyle = plotter.PostStep
			l.Color = s.color
			l.Width = vg.Points(1.5)
			pl.p.Add(l)
			if pl.p == cdf {
				pl.p.Legend.Add(s.name, l)
			}
		}
	}
	// After Add, which widens the axes to the data: the CDF panel stops at
	// the p99.9, the tail panel shows everything.
	cdf.X.Min, cdf.X.Max = 0, math.Ceil(xmax)
	cdf.Legend.Top = false
	cdf.Legend.Left = false
	cdf.Legend.YOffs = vg.Points(40)
	cdf.Add(plotter.NewGrid())
	tail.Add(plotter.NewGrid())

	w, h := 12*vg.Inch, 4.5*vg.Inch
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("bench: plot: %w", err)
	}
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	plots := [][]*plot.Plot{{cdf, tail}}
	canvases := plot.Align(plots, tiles, draw.New(c))
	cdf.Draw(canvases[0][0])
	tail.Draw(canvases[0][1])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: plot: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: plot: %w; pick a writable --plot path", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: writing plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: writing plot %s: %w", path, err)
	}
	return nil
}
