package main

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotWidth and plotHeight are each PNG's size: 720 x 450 pixels at gonum/plot's 96 dpi.
const plotWidth, plotHeight = 7.5 * vg.Inch, 4.6875 * vg.Inch

// A curve is one series' points against the offered rate: y with its
// spread over the rounds (low and high below and above y).
type curve struct {
	s       series
	xy      plotter.XYs
	errs    plotter.YErrors
	spreads bool
}

func (c curve) Len() int                        { return len(c.xy) }
func (c curve) XY(i int) (float64, float64)     { return c.xy[i].X, c.xy[i].Y }
func (c curve) YError(i int) (float64, float64) { return c.errs[i].Low, c.errs[i].High }

// curves splits points into one curve per series, y taken by value, its
// spread by spread (min and max over the rounds).
func curves(points []point, value func(point) float64, spread func(point) (float64, float64)) []curve {
	var out []curve
	for _, pt := range points {
		if len(out) == 0 || out[len(out)-1].s != pt.series {
			out = append(out, curve{s: pt.series})
		}
		c := &out[len(out)-1]
		y := value(pt)
		lo, hi := spread(pt)
		c.xy = append(c.xy, plotter.XY{X: float64(pt.offered), Y: y})
		c.errs = append(c.errs, struct{ Low, High float64 }{y - lo, hi - y})
		if pt.rounds > 1 {
			c.spreads = true
		}
	}
	return out
}

// style gives each series its look: sipedge over UDP blue, over TCP green
// with squares, Kamailio red; plain a solid line, failover dashed.
func style(s series) (color.Color, []vg.Length, draw.GlyphDrawer) {
	var c color.Color = color.RGBA{R: 0x1f, G: 0x62, B: 0xb4, A: 0xff}
	if s.server != "sipedge" {
		c = color.RGBA{R: 0xc8, G: 0x32, B: 0x2b, A: 0xff}
	}
	if s.transport == "tcp" {
		c = color.RGBA{R: 0x2a, G: 0x9d, B: 0x8f, A: 0xff}
	}
	var dashes []vg.Length
	if s.scenario != "plain" {
		dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	var glyph draw.GlyphDrawer = draw.CircleGlyph{}
	if s.transport == "tcp" {
		glyph = draw.SquareGlyph{}
	}
	return c, dashes, glyph
}

// savePlot draws one line per series of points (value against the offered
// rate, with min-max whiskers when several rounds ran) into a PNG at path.
// The legend goes bottom left, or with legendTop top right above the
// data, the y axis stretched to make room for it.
func savePlot(path, title, ylabel string, points []point, value func(point) float64, spread func(point) (float64, float64), legendTop bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "offered calls/s (SIPp)"
	p.Y.Label.Text = ylabel
	p.Legend.Top = legendTop
	p.Legend.Left = !legendTop
	p.Add(plotter.NewGrid())
	// A tick at each offered rate, labelled.
	var ticks []plot.Tick
	for _, pt := range points {
		x := float64(pt.offered)
		if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == x }) {
			ticks = append(ticks, plot.Tick{Value: x, Label: number(x)})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	for _, c := range curves(points, value, spread) {
		col, dashes, glyph := style(c.s)
		line, dots, err := plotter.NewLinePoints(c.xy)
		if err != nil {
			return fmt.Errorf("cannot plot %s: %w", c.s, err)
		}
		line.Color, line.Dashes, line.Width = col, dashes, vg.Points(1.5)
		dots.Color, dots.Shape, dots.Radius = col, glyph, vg.Points(2.5)
		p.Add(line, dots)
		p.Legend.Add(c.s.String(), line, dots)
		if c.spreads {
			bars, err := plotter.NewYErrorBars(c)
			if err != nil {
				return fmt.Errorf("cannot plot %s: %w", c.s, err)
			}
			bars.Color = col
			p.Add(bars)
		}
	}
	p.X.Min, p.Y.Min = 0, 0
	if legendTop {
		p.Y.Max *= 1.5
	}
	if err := p.Save(plotWidth, plotHeight, path); err != nil {
		return fmt.Errorf("cannot write %q: %w", path, err)
	}
	return nil
}

// savePlots writes the two capacity plots.
func savePlots(successPath, cpuPath string, points []point) error {
	err := savePlot(successPath, "Calls answered", "answered / attempted, %", points,
		func(p point) float64 { return p.successPct },
		func(p point) (float64, float64) { return p.successMin, p.successMax }, false)
	if err != nil {
		return err
	}
	return savePlot(cpuPath, "Server CPU per call", "µs of CPU per call attempted", points,
		func(p point) float64 { return p.cpuUs },
		func(p point) (float64, float64) { return p.cpuMin, p.cpuMax }, true)
}
