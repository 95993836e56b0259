//! SVG charts (plotters, SVG backend, text left to the browser): latency histograms with a log count axis,
//! percentile curves on log axes, and the timeline of the largest latency per interval. Every chart takes
//! one or more named series, so a report and a comparison draw with the same code.
//!
//! Sizes are bounded whatever the run length: histograms have at most [`BINS`] bins and timelines at
//! most [`TIMELINE_POINTS`] points (the largest value of each span is kept, so a single spike survives).

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use rtgauge_model::latency::{Sparse, TimelineEntry};
use rtgauge_model::units::{us, us_f64};

/// Bins of a latency histogram chart.
pub const BINS: usize = 120;
/// Most points a timeline or percentile curve is drawn with (longer ones are thinned).
pub const TIMELINE_POINTS: usize = 1200;
const SIZE: (u32, u32) = (720, 320);
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// One named distribution or timeline to draw.
pub struct Series<'a, T: ?Sized> {
    /// The legend's name for it (a CPU, a run).
    pub name: String,
    /// What to draw.
    pub data: &'a T,
}

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Draw with plotters into an SVG string; a drawing error yields a short SVG saying so (a chart is never
/// worth failing a report for).
fn svg(
    draw: impl FnOnce(&DrawingArea<SVGBackend, plotters::coord::Shift>) -> Result<(), String>,
) -> String {
    svg_sized(SIZE, draw)
}

fn svg_sized(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, plotters::coord::Shift>) -> Result<(), String>,
) -> String {
    let mut out = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let r = root
            .fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|_| draw(&root));
        r.and_then(|_| root.present().map_err(|e| e.to_string()))
    };
    match result {
        Ok(()) => out,
        Err(e) => format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"40\"><text x=\"4\" y=\"20\">chart not drawn: {}</text></svg>",
            size.0,
            maud::html! { (e) }.into_string()
        ),
    }
}

/// The common frame of every chart: title, margin, room for the axis labels.
fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(56);
    b
}

/// A log axis range around the values with half a step of room (0.001..1 when there are none).
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    if lo > hi {
        (0.001, 1.0)
    } else {
        ((lo / 1.5).max(0.001), hi * 1.5)
    }
}

/// One line per named series in the palette's colours, then the legend.
/// Draw the chart's grid with its axis names and label formats (`x_label` None: plotters' own).
fn mesh<'b, X, Y>(
    chart: &mut ChartContext<'b, SVGBackend<'b>, Cartesian2d<X, Y>>,
    x_desc: &str,
    y_desc: &str,
    x_label: Option<&dyn Fn(&f64) -> String>,
    y_label: &dyn Fn(&f64) -> String,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut m = chart.configure_mesh();
    m.x_desc(x_desc).y_desc(y_desc).y_label_formatter(y_label);
    if let Some(f) = x_label {
        m.x_label_formatter(f);
    }
    m.draw().map_err(|e| e.to_string())
}

/// Each series' name with its points, for [`lines`].
fn named<'a, T: ?Sized>(
    series: &'a [Series<T>],
    points: &'a [Vec<(f64, f64)>],
) -> impl Iterator<Item = (&'a str, &'a [(f64, f64)])> {
    series
        .iter()
        .zip(points)
        .map(|(s, p)| (s.name.as_str(), p.as_slice()))
}

fn lines<'a, 'b, X, Y>(
    chart: &mut ChartContext<'b, SVGBackend<'b>, Cartesian2d<X, Y>>,
    named: impl Iterator<Item = (&'a str, &'a [(f64, f64)])>,
    width: u32,
    at: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let mut n = 0;
    for (i, (name, pts)) in named.enumerate() {
        n += 1;
        let c = color(i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(width)))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 12, y)], c.stroke_width(2)));
    }
    legend(chart, at, n)
}

/// Series beyond which a chart draws no legend (64 names would cover the plot; the heatmap and the strip
/// chart name the CPUs instead).
pub const LEGEND_MAX: usize = 8;

fn legend<'b, CT: CoordTranslate>(
    chart: &mut ChartContext<'b, SVGBackend<'b>, CT>,
    at: SeriesLabelPosition,
    n: usize,
) -> Result<(), String> {
    if n > LEGEND_MAX {
        return Ok(());
    }
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// Histogram: counts per latency bin, log count axis. Bins are linear up to the largest value unless the
/// range spans more than two decades, where they become logarithmic (a 200 ms stall next to 20 µs
/// latencies would otherwise squeeze everything into the first bin).
pub fn histogram(title: &str, series: &[Series<Sparse>]) -> String {
    histogram_within(title, series, series)
}

/// [`histogram`] of `series` on the latency axis of `all` (the CPUs of a run drawn side by side on the
/// same axis, so their charts compare at a glance).
pub fn histogram_within(title: &str, series: &[Series<Sparse>], all: &[Series<Sparse>]) -> String {
    let axis = Axis::of(all);
    let (lo, hi, log) = (axis.lo, axis.hi, axis.log);
    let bins: Vec<Vec<(f64, f64, u64)>> = series.iter().map(|s| axis.bin(s.data)).collect();
    let ymax = bins.iter().flatten().map(|b| b.2).max().unwrap_or(1).max(1) as f64 * 2.0;
    svg(|root| {
        let mut b = frame(root, title);
        let x = us_f64(lo)..us_f64(hi);
        let y = (0.5f64..ymax).log_scale();
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(|e| e.to_string())?;
                mesh(
                    &mut chart,
                    "latency (µs)",
                    "samples",
                    Some(&|x| num_label(*x)),
                    &|y| num_label(*y),
                )?;
                for (i, (s, bs)) in series.iter().zip(&bins).enumerate() {
                    let c = color(i);
                    chart
                        .draw_series(bs.iter().map(|&(x0, x1, n)| {
                            Rectangle::new([(x0, 0.5), (x1, n as f64)], c.mix(0.45).filled())
                        }))
                        .map_err(|e| e.to_string())?
                        .label(s.name.clone())
                        .legend(move |(x, y)| {
                            Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled())
                        });
                }
                legend(&mut chart, SeriesLabelPosition::MiddleRight, series.len())?;
                Ok(())
            }};
        }
        if log {
            draw!(b.build_cartesian_2d(x.log_scale(), y))
        } else {
            draw!(b.build_cartesian_2d(x, y))
        }
    })
}

/// Percentile curve: latency against 1/(1−q) on log axes (HdrHistogram's plot), from p0 to the largest
/// sample.
pub fn percentiles(title: &str, series: &[Series<Sparse>]) -> String {
    let curves: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            let total: u64 = s.data.iter().map(|x| x.1).sum();
            let mut acc = 0u64;
            let mut pts = Vec::new();
            for &(v, n) in s.data.iter() {
                acc += n;
                // x = 1/(1−q), capped where q reaches 1 (the last sample) at 10× the previous point.
                let q = acc as f64 / total.max(1) as f64;
                let x = if q >= 1.0 {
                    (total as f64).max(10.0)
                } else {
                    1.0 / (1.0 - q)
                };
                pts.push((x.max(1.0), us(v.max(1))));
            }
            thin(pts, TIMELINE_POINTS)
        })
        .collect();
    let xmax = curves.iter().flatten().map(|p| p.0).fold(10.0f64, f64::max) * 1.5;
    let (ymin, ymax) = log_range(curves.iter().flatten().map(|p| p.1));
    svg(|root| {
        let mut chart = frame(root, title)
            .build_cartesian_2d((1.0f64..xmax).log_scale(), (ymin..ymax).log_scale())
            .map_err(|e| e.to_string())?;
        mesh(
            &mut chart,
            "percentile",
            "latency (µs)",
            Some(&|x| percentile_label(*x)),
            &|y| num_label(*y),
        )?;
        lines(
            &mut chart,
            named(series, &curves),
            2,
            SeriesLabelPosition::UpperLeft,
        )
    })
}

/// The latency bins shared by the series of a chart: [`BINS`] bins from the smallest to the largest value,
/// linear, or logarithmic when the values span more than two decades.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn of(series: &[Series<Sparse>]) -> Axis {
        let lo = series
            .iter()
            .filter_map(|s| s.data.first())
            .map(|x| x.0)
            .min()
            .unwrap_or(1)
            .max(1) as f64;
        let hi = series
            .iter()
            .filter_map(|s| s.data.last())
            .map(|x| x.0)
            .max()
            .unwrap_or(2)
            .max(lo as u64 + 1) as f64;
        Axis {
            lo,
            hi,
            log: hi / lo > 100.0,
        }
    }

    fn edge(&self, i: usize) -> f64 {
        let f = i as f64 / BINS as f64;
        if self.log {
            self.lo * (self.hi / self.lo).powf(f)
        } else {
            self.lo + (self.hi - self.lo) * f
        }
    }

    fn counts(&self, data: &Sparse) -> Vec<u64> {
        let mut c = vec![0u64; BINS];
        for &(v, n) in data.iter() {
            let f = if self.log {
                ((v.max(1) as f64) / self.lo).ln() / (self.hi / self.lo).ln()
            } else {
                (v as f64 - self.lo) / (self.hi - self.lo)
            };
            let i = ((f.max(0.0) * BINS as f64) as usize).min(BINS - 1);
            c[i] += n;
        }
        c
    }

    /// The non-empty bins as (from µs, to µs, count).
    fn bin(&self, data: &Sparse) -> Vec<(f64, f64, u64)> {
        self.counts(data)
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (us_f64(self.edge(i)), us_f64(self.edge(i + 1)), n))
            .collect()
    }
}

/// Many histograms in one chart, each a thin line through its bins' counts (log count axis): the plot of
/// long-term latency monitoring, where 64 CPUs read as one band and an outlying CPU stands out. Filled bars
/// ([`histogram`]) would hide each other.
pub fn histogram_overlay(title: &str, series: &[Series<Sparse>]) -> String {
    let axis = Axis::of(series);
    let curves: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            axis.counts(s.data)
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| (us_f64((axis.edge(i) + axis.edge(i + 1)) / 2.0), n as f64))
                .collect()
        })
        .collect();
    let ymax = curves.iter().flatten().map(|p| p.1).fold(1.0f64, f64::max) * 2.0;
    svg(|root| {
        let mut b = frame(root, title);
        let x = us_f64(axis.lo)..us_f64(axis.hi);
        let y = (0.5f64..ymax).log_scale();
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(|e| e.to_string())?;
                mesh(
                    &mut chart,
                    "latency (µs)",
                    "samples",
                    Some(&|x| num_label(*x)),
                    &|y| num_label(*y),
                )?;
                lines(
                    &mut chart,
                    named(series, &curves),
                    1,
                    SeriesLabelPosition::UpperRight,
                )
            }};
        }
        if axis.log {
            draw!(b.build_cartesian_2d(x.log_scale(), y))
        } else {
            draw!(b.build_cartesian_2d(x, y))
        }
    })
}

/// CPU × latency heatmap: one row per CPU, one cell per latency bin, shaded by the log of its count, so 64
/// CPUs' distributions fit in one chart whose height grows by a few pixels per CPU.
pub fn heatmap(title: &str, series: &[Series<Sparse>]) -> String {
    let axis = Axis::of(series);
    let rows: Vec<Vec<(f64, f64, u64)>> = series.iter().map(|s| axis.bin(s.data)).collect();
    let n = series.len().max(1);
    let cmax = rows.iter().flatten().map(|c| c.2).max().unwrap_or(1).max(2) as f64;
    let row_px = (240 / n as u32).clamp(5, 24);
    let size = (SIZE.0, 90 + row_px * n as u32);
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    // Row i spans i−½..i+½, so a tick at i names it.
    let label = |y: f64| -> String {
        let i = y.round();
        if i < 0.0 || (y - i).abs() > 0.01 {
            return String::new();
        }
        names
            .get(i as usize)
            .map_or(String::new(), |s| s.to_string())
    };
    svg_sized(size, |root| {
        let mut b = frame(root, title);
        let x = us_f64(axis.lo)..us_f64(axis.hi);
        let y = -0.5..n as f64 - 0.5;
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(|e| e.to_string())?;
                chart
                    .configure_mesh()
                    .disable_y_mesh()
                    .x_desc("latency (µs)")
                    .y_labels(n.min(32))
                    .x_label_formatter(&|x| num_label(*x))
                    .y_label_formatter(&|y| label(*y))
                    .draw()
                    .map_err(|e| e.to_string())?;
                for (i, r) in rows.iter().enumerate() {
                    let y0 = i as f64 - 0.5;
                    chart
                        .draw_series(r.iter().map(|&(x0, x1, c)| {
                            // Shade: light for one sample, dark for the largest count (log scale).
                            let t = ((c as f64).ln() / cmax.ln()).clamp(0.0, 1.0);
                            let shade = RGBColor(
                                (222.0 - 214.0 * t) as u8,
                                (235.0 - 187.0 * t) as u8,
                                (247.0 - 140.0 * t) as u8,
                            );
                            Rectangle::new([(x0, y0), (x1, y0 + 1.0)], shade.filled())
                        }))
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            }};
        }
        if axis.log {
            draw!(b.build_cartesian_2d(x.log_scale(), y))
        } else {
            draw!(b.build_cartesian_2d(x, y))
        }
    })
}

/// Per-CPU strip chart: for each CPU (x) its figures (e.g. p99, p99.9, max) as dots on a log latency axis;
/// `figures` are (name, one value in ns per CPU, in the order of `cpus`).
pub fn strip(title: &str, cpus: &[String], figures: &[(String, Vec<u64>)]) -> String {
    let (ymin, ymax) = log_range(
        figures
            .iter()
            .flat_map(|f| f.1.iter().map(|&v| us(v.max(1)))),
    );
    let n = cpus.len().max(1);
    let label = |x: f64| -> String {
        let i = x.round();
        if i < 0.0 || (x - i).abs() > 0.01 {
            return String::new();
        }
        cpus.get(i as usize)
            .map_or(String::new(), |s| s.trim_start_matches("CPU ").to_string())
    };
    svg(|root| {
        let mut chart = frame(root, title)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, (ymin..ymax).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("CPU")
            .y_desc("latency (µs)")
            .x_labels(n.min(32))
            .x_label_formatter(&|x| label(*x))
            .y_label_formatter(&|y| num_label(*y))
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, (name, vals)) in figures.iter().enumerate() {
            let c = color(k);
            chart
                .draw_series(
                    vals.iter()
                        .enumerate()
                        .map(|(i, &v)| Circle::new((i as f64, us(v.max(1))), 3, c.filled())),
                )
                .map_err(|e| e.to_string())?
                .label(name.clone())
                .legend(move |(x, y)| Circle::new((x + 5, y), 3, c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, figures.len())
    })
}

/// Axis numbers as people write them: 0.02, 1.5, 250, 12k, 3.4M (plotters prints 100000000.0).
fn num_label(v: f64) -> String {
    let (v, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"), // thousands on an axis: not a time
        _ => (v, ""),
    };
    let digits = if v.abs() >= 100.0 || v == 0.0 {
        0
    } else {
        // three significant digits at most
        (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize
    };
    let s = format!("{v:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    format!("{s}{suffix}")
}

fn percentile_label(x: f64) -> String {
    // x = 1/(1−q): 10 → 90 %, 100 → 99 %, …
    let q = 100.0 * (1.0 - 1.0 / x);
    let s = format!("{q:.5}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// Keep at most `n` points of a monotone curve (evenly by index, always the last).
fn thin(pts: Vec<(f64, f64)>, n: usize) -> Vec<(f64, f64)> {
    if pts.len() <= n {
        return pts;
    }
    let step = pts.len().div_ceil(n);
    let last = pts.last().copied();
    let mut out: Vec<(f64, f64)> = pts.into_iter().step_by(step).collect();
    if let Some(l) = last {
        out.push(l);
    }
    out
}

/// The largest latency per timeline interval over time (log latency axis), at most [`TIMELINE_POINTS`]
/// points: each point is the largest of the intervals it covers.
pub fn timeline(title: &str, series: &[Series<[TimelineEntry]>]) -> String {
    let end_ns = series
        .iter()
        .filter_map(|s| s.data.last())
        .map(|e| e.start_ns)
        .max()
        .unwrap_or(0)
        .max(1);
    let (unit, div) = if end_ns >= 3 * 3600 * 1_000_000_000 {
        ("h", 3600e9)
    } else if end_ns >= 180 * 1_000_000_000 {
        ("min", 60e9)
    } else {
        ("s", 1e9)
    };
    let points: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            let span = (end_ns / TIMELINE_POINTS as u64).max(1);
            let mut pts: Vec<(f64, f64)> = Vec::new();
            let mut cur: Option<(u64, u64)> = None;
            for e in s.data.iter() {
                let b = e.start_ns / span;
                match &mut cur {
                    Some((cb, m)) if *cb == b => *m = (*m).max(e.max_ns),
                    _ => {
                        if let Some((cb, m)) = cur {
                            pts.push(((cb * span) as f64 / div, us(m.max(1))));
                        }
                        cur = Some((b, e.max_ns));
                    }
                }
            }
            if let Some((cb, m)) = cur {
                pts.push(((cb * span) as f64 / div, us(m.max(1))));
            }
            pts
        })
        .collect();
    let xmax = (end_ns as f64 / div).max(1e-3) * 1.02;
    let (ymin, ymax) = log_range(points.iter().flatten().map(|p| p.1));
    svg(|root| {
        let mut chart = frame(root, title)
            .build_cartesian_2d(0.0..xmax, (ymin..ymax).log_scale())
            .map_err(|e| e.to_string())?;
        mesh(
            &mut chart,
            &format!("time ({unit})"),
            "max latency (µs)",
            None,
            &|y| num_label(*y),
        )?;
        lines(
            &mut chart,
            named(series, &points),
            1,
            SeriesLabelPosition::MiddleRight,
        )
    })
}

/// A curve over log axes: one named series of (x, y) points per run, e.g. memory load latency (ns)
/// against the working-set size (bytes), with the sizes of the caches marked as vertical lines.
pub fn log_curve(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series<[(f64, f64)]>],
    marks: &[(f64, String)],
) -> String {
    let pts = series.iter().flat_map(|s| s.data.iter());
    let (x0, x1, y0, y1) = pts.fold((f64::MAX, 0.0f64, f64::MAX, 0.0f64), |(a, b, c, d), p| {
        (a.min(p.0), b.max(p.0), c.min(p.1), d.max(p.1))
    });
    if x0 > x1 || y0 > y1 {
        return svg(|_| Err("no data".into()));
    }
    let (x0, x1) = ((x0 / 1.5).max(1e-9), x1 * 1.5);
    let (y0, y1) = ((y0 / 1.5).max(1e-9), y1 * 1.5);
    svg(|root| {
        let mut chart = frame(root, title)
            .build_cartesian_2d((x0..x1).log_scale().base(4.0), (y0..y1).log_scale())
            .map_err(|e| e.to_string())?;
        mesh(
            &mut chart,
            x_desc,
            y_desc,
            Some(&|x| bytes_label(*x)),
            &|y| num_label(*y),
        )?;
        for (x, name) in marks {
            chart
                .draw_series(LineSeries::new([(*x, y0), (*x, y1)], BLACK.mix(0.3)))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series([Text::new(name.clone(), (*x, y1 / 1.3), ("sans-serif", 11))])
                .map_err(|e| e.to_string())?;
        }
        let named = series.iter().map(|s| (s.name.as_str(), s.data));
        lines(&mut chart, named, 2, SeriesLabelPosition::UpperLeft)
    })
}

/// A latency-vs-load curve: one named series of (load, latency ns) points per figure (p50, p99, …) on a
/// linear load axis and a log latency axis, with the gate's bound as a dashed horizontal line.
pub fn load_curve(
    title: &str,
    x_desc: &str,
    series: &[Series<[(f64, f64)]>],
    bound: Option<(f64, String)>,
) -> String {
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.data.iter().map(|&(x, y)| (x, us_f64(y))))
        .collect();
    let bound = bound.map(|(ns, name)| (us_f64(ns), name));
    let ys = pts.iter().map(|p| p.1).chain(bound.iter().map(|b| b.0));
    let (y0, y1) = ys.fold((f64::MAX, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    if pts.is_empty() || y0 > y1 {
        return svg(|_| Err("no data".into()));
    }
    let x1 = pts.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1.0);
    let (y0, y1) = ((y0 / 1.5).max(1e-3), y1 * 1.5);
    let in_us: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| s.data.iter().map(|&(x, y)| (x, us_f64(y))).collect())
        .collect();
    svg(|root| {
        let mut chart = frame(root, title)
            .build_cartesian_2d(0.0..x1 * 1.05, (y0..y1).log_scale())
            .map_err(|e| e.to_string())?;
        mesh(&mut chart, x_desc, "latency (µs)", None, &|y| {
            num_label(*y)
        })?;
        if let Some((b, name)) = &bound {
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, *b), (x1 * 1.05, *b)],
                    6,
                    4,
                    BLACK.mix(0.6).stroke_width(1),
                ))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series([Text::new(name.clone(), (0.0, *b * 1.1), ("sans-serif", 11))])
                .map_err(|e| e.to_string())?;
        }
        lines(
            &mut chart,
            named(series, &in_us),
            2,
            SeriesLabelPosition::UpperLeft,
        )
    })
}

fn bytes_label(b: f64) -> String {
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.0}G", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.0}M", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.0}K", b / 1024.0)
    } else {
        format!("{b:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers_are_compact() {
        let l = |v: f64| num_label(v);
        assert_eq!(
            [
                l(0.0),
                l(0.01),
                l(0.025),
                l(1.0),
                l(1.5),
                l(10.0),
                l(250.0),
                l(1000.0)
            ],
            ["0", "0.01", "0.025", "1", "1.5", "10", "250", "1000"]
        );
        assert_eq!(
            [l(10_000.0), l(123_456.0), l(1e8), l(3.4e6), l(2e9)],
            ["10k", "123k", "100M", "3.4M", "2G"]
        );
    }

    #[test]
    fn many_cpu_charts_stay_bounded_and_name_the_cpus() {
        let data: Vec<Sparse> = (0..64u64)
            .map(|i| vec![(2_000 + i * 10, 1000), (30_000, 5), (200_000 + i, 1)])
            .collect();
        let s: Vec<Series<Sparse>> = data
            .iter()
            .enumerate()
            .map(|(i, d)| Series {
                name: format!("CPU {i}"),
                data: d,
            })
            .collect();
        let heat = heatmap("h", &s);
        assert!(!heat.contains("chart not drawn"), "{heat}");
        // 64 rows of 5 px under the frame: the chart grows a few pixels per CPU, not a chart per CPU.
        assert!(heat.contains(r#"height="410""#), "{}", &heat[..200]);
        assert!(heat.contains(">\nCPU 0\n<") && heat.contains(">\nCPU 62\n<"));
        let two = heatmap("h", &s[..2]);
        assert!(two.contains(r#"height="138""#), "{}", &two[..200]);
        let over = histogram_overlay("o", &s);
        assert!(!over.contains("chart not drawn"));
        assert!(!over.contains("CPU 5\n"), "no legend of 64 names");
        assert!(
            histogram_overlay("o", &s[..2]).contains("CPU 1\n"),
            "a legend for two"
        );
        let names: Vec<String> = s.iter().map(|x| x.name.clone()).collect();
        let st = strip(
            "s",
            &names,
            &[("max".into(), (0..64).map(|i| 10_000 + i * 100).collect())],
        );
        assert!(!st.contains("chart not drawn"));
        assert_eq!(
            st.matches("<circle").count(),
            64 + 1,
            "a dot per CPU and the legend's"
        );
        for svg in [heat, over, st] {
            assert!(svg.len() < 300_000, "{} bytes", svg.len());
        }
    }

    #[test]
    fn charts_are_svg_with_their_series() {
        let a: Sparse = vec![(2_000, 10), (3_000, 1000), (9_000, 3)];
        let b: Sparse = vec![(2_500, 12), (4_000, 900), (200_000_000, 1)];
        let s = [
            Series {
                name: "CPU 0".into(),
                data: &a,
            },
            Series {
                name: "CPU 1".into(),
                data: &b,
            },
        ];
        for svg in [histogram("h", &s), percentiles("p", &s)] {
            assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
            assert!(svg.contains("CPU 0") && svg.contains("CPU 1"));
            assert!(!svg.contains("chart not drawn"), "{svg}");
        }
        let tl: Vec<TimelineEntry> = (0..604_800u64)
            .map(|i| TimelineEntry {
                start_ns: i * 1_000_000_000,
                count: 1000,
                max_ns: 10_000 + i % 7,
                missed: 0,
            })
            .collect();
        let t = timeline(
            "t",
            &[Series {
                name: "CPU 0".into(),
                data: tl.as_slice(),
            }],
        );
        assert!(!t.contains("chart not drawn"));
        assert!(
            t.len() < 200_000,
            "a week of 1 s intervals is {} bytes of SVG",
            t.len()
        );
    }
}
