//! The SVG plot of the hub's ratios to its peers against its
//! targets: one horizontal bar per target (log scale), green where met,
//! red where not, the target a black mark.
//!
//! Uses `plotters`' SVG backend and [`super::report::TARGETS`].

use std::path::Path;

use plotters::prelude::*;

use super::report::{Results, TARGETS};
use crate::report::ratio;

fn failed(err: impl std::fmt::Display) -> String {
    format!("drawing the plot: {err}")
}

/// Draws the plot to `path`.
pub(crate) fn write(r: &Results, path: &Path) -> Result<(), String> {
    // Top to bottom in TARGETS' order: the y axis counts from the bottom.
    let rows: Vec<(&str, Option<f64>, f64)> = TARGETS
        .iter()
        .rev()
        .map(|t| (t.label, t.ratio(r), t.bound))
        .collect();
    let values = rows
        .iter()
        .flat_map(|(_, x, bound)| x.iter().copied().chain([*bound]));
    let lo = values.clone().fold(f64::INFINITY, f64::min) / 2.0;
    let hi = values.fold(0.0, f64::max) * 2.0;
    let n = rows.len();
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(failed)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "greenlet::hub / peer: time (memory for the sleepers' RSS); | = the \
                 target; load {:.1}",
                r.load.2
            ),
            ("sans-serif", 18),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(190)
        .build_cartesian_2d((lo..hi).log_scale(), (0..n).into_segmented())
        .map_err(failed)?;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            rows.get(*i).map_or(String::new(), |row| row.0.to_string())
        }
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&label)
        .x_desc("ratio, log scale (left of the mark: target met)")
        .draw()
        .map_err(failed)?;
    chart
        .draw_series(rows.iter().enumerate().filter_map(|(i, (_, x, bound))| {
            let x = (*x)?;
            let color = if x <= *bound { GREEN } else { RED };
            let mut bar = Rectangle::new(
                [
                    (lo, SegmentValue::Exact(i)),
                    (x, SegmentValue::Exact(i + 1)),
                ],
                color.mix(0.6).filled(),
            );
            bar.set_margin(5, 5, 0, 0);
            Some(bar)
        }))
        .map_err(failed)?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, (_, _, bound))| {
            PathElement::new(
                vec![
                    (*bound, SegmentValue::Exact(i)),
                    (*bound, SegmentValue::Exact(i + 1)),
                ],
                BLACK.stroke_width(3),
            )
        }))
        .map_err(failed)?;
    chart
        .draw_series(rows.iter().enumerate().filter_map(|(i, (_, x, bound))| {
            let x = (*x)?;
            // Right of the bar and of the target's mark, clear of both.
            Some(Text::new(
                ratio(x),
                (x.max(*bound) * 1.08, SegmentValue::CenterOf(i)),
                ("sans-serif", 13),
            ))
        }))
        .map_err(failed)?;
    root.present().map_err(failed)
}
