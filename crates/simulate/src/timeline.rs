//! The timeline picture: one row per loader (busy / blocked bars), one GPU
//! row, and the queue length as a step line underneath, sharing the time axis.

use crate::sim::{LoaderState, SimResult};
use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// More rows than this turn into unreadable slivers; the rest are named in the title.
pub(crate) const MAX_LOADER_ROWS: usize = 32;

const BUSY: RGBColor = RGBColor(66, 133, 244);
const BLOCKED: RGBColor = RGBColor(234, 67, 53);
const GPU: RGBColor = RGBColor(52, 168, 83);

/// The timeline as SVG text: the command writes it through the one writer
/// (`grin_output`), which refuses to write it over an input, waits on no
/// FIFO and leaves no partial file on a full disk (plotters' own file
/// backend did all three, issue 90).
pub fn render_svg(result: &SimResult) -> Result<String> {
    let mut svg = String::new();
    draw(result, &mut svg).map_err(|e| anyhow!("cannot draw the timeline: {e}"))?;
    Ok(svg)
}

fn draw(result: &SimResult, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let t = &result.timeline;
    let p = &result.params;
    let drawn = p.loaders.min(MAX_LOADER_ROWS);
    // Rows from the top: GPU, then loaders 0..drawn.
    let rows = drawn + 1;
    // Three empty rows above the bars hold the legend.
    let bars_height = 60 + 22 * (rows as u32 + 3);
    let root = SVGBackend::with_string(svg, (1200, bars_height + 260)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(bars_height + 40);
    let window = t.window_ms.max(f64::MIN_POSITIVE);

    let mut title = format!(
        "{} loaders, load {:.2}±{:.2} ms, step {:.2} ms, queue {}: device busy {:.1}% (predicted {:.1}%)",
        p.loaders,
        p.load_ms,
        p.load_jitter_ms,
        p.step_ms,
        p.queue,
        100.0 * result.gpu_busy,
        100.0 * result.predicted_busy
    );
    if drawn < p.loaders {
        title.push_str(&format!("; loaders {}.. not drawn", drawn));
    }
    if t.truncated {
        title.push_str("; interval cap reached");
    }
    let mut chart = ChartBuilder::on(&top)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..window, 0f64..rows as f64 + 3.0)?;
    let row_names: Vec<String> =
        std::iter::once("GPU".to_string()).chain((0..drawn).map(|i| format!("loader {i}"))).collect();
    chart.configure_mesh().disable_y_mesh().y_labels(0).x_desc("time (ms)").draw()?;
    let row_y = |row: usize| (rows - 1 - row) as f64;
    // A sliver of white between back-to-back bars keeps one batch apart from the next.
    let gap = window / 1500.0;
    let bar = move |start: f64, end: f64, y: f64, color: RGBColor| {
        let end = end - gap.min(0.3 * (end - start));
        Rectangle::new([(start, y + 0.15), (end, y + 0.85)], color.filled())
    };
    // Row names are placed by hand: axis ticks would land between rows.
    for (row, name) in row_names.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(0.0, row_y(row) + 0.5));
        root.draw(&Text::new(name.clone(), (x - 70, y - 6), ("sans-serif", 12)))?;
    }
    chart.draw_series(t.gpu.iter().map(|&(s, e)| bar(s, e, row_y(0), GPU)))?;
    let loader_bars = t.loaders.iter().filter(|i| i.loader < drawn).map(|i| {
        let color = if i.state == LoaderState::Busy { BUSY } else { BLOCKED };
        bar(i.start_ms, i.end_ms, row_y(i.loader + 1), color)
    });
    chart.draw_series(loader_bars)?;
    // Legend entries only; the bars above are drawn without labels to keep one entry per kind.
    for (name, color) in [("device busy", GPU), ("loader busy", BUSY), ("loader blocked (queue full)", BLOCKED)] {
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let max_len = t.queue.iter().map(|&(_, n)| n).max().unwrap_or(0).max(p.queue) as f64;
    let mut queue_chart = ChartBuilder::on(&bottom)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..window, 0f64..max_len + 0.5)?;
    queue_chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("queue length")
        .y_labels((max_len as usize + 1).min(12))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    queue_chart.draw_series(LineSeries::new(step_points(&t.queue, window), BLACK.stroke_width(1)))?;
    root.present()?;
    Ok(())
}

/// A step line through (time, length) changes, held until the window's end.
fn step_points(changes: &[(f64, usize)], window: f64) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(changes.len() * 2 + 1);
    let mut last = 0.0;
    for &(t, n) in changes {
        if !points.is_empty() {
            points.push((t, last));
        }
        points.push((t, n as f64));
        last = n as f64;
    }
    points.push((window, last));
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{simulate, SimParams};

    #[test]
    fn draws_an_svg_with_every_part() {
        let p = SimParams { seconds: 2.0, timeline_ms: 300.0, ..SimParams::new(40.0, 5.0, 3, 12.0, 2.0) };
        let r = simulate(&p).unwrap();
        let svg = render_svg(&r).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..60.min(svg.len())]);
        for label in ["device busy", "loader 2", "queue length", "loader blocked"] {
            assert!(svg.contains(label), "missing {label}");
        }
        // One rect per kept interval at least (plus background and legend).
        let rects = svg.matches("<rect").count();
        assert!(rects >= r.timeline.gpu.len() + r.timeline.loaders.len(), "{rects} rects");
    }

    #[test]
    fn step_line_holds_each_level() {
        let pts = step_points(&[(0.0, 0), (5.0, 1), (7.0, 0)], 10.0);
        assert_eq!(pts, vec![(0.0, 0.0), (5.0, 0.0), (5.0, 1.0), (7.0, 1.0), (7.0, 0.0), (10.0, 0.0)]);
    }
}
