//! Draw the comparison script's results (a CSV of
//! `scenario,server,rps,p99_us,cpu_us_per_req`) as an SVG: requests/s per
//! scenario, one line per server.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Parser;
use plotters::prelude::*;

/// Plot run.sh's CSV.
#[derive(Parser, Debug)]
struct Args {
    /// The CSV written by run.sh.
    csv: PathBuf,
    /// The SVG to write.
    svg: PathBuf,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let text = std::fs::read_to_string(&args.csv)?;
    let mut scenarios: Vec<String> = Vec::new();
    let mut series: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 3 {
            continue;
        }
        let idx = match scenarios.iter().position(|s| s == f[0]) {
            Some(i) => i,
            None => {
                scenarios.push(f[0].to_string());
                scenarios.len() - 1
            }
        };
        let rps: f64 = f[2].parse().unwrap_or(0.0);
        series.entry(f[1].to_string()).or_default().push((idx, rps));
    }
    let max = series
        .values()
        .flatten()
        .map(|p| p.1)
        .fold(1.0f64, f64::max);
    let root = SVGBackend::new(&args.svg, (1400, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = scenarios.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "requests/s per scenario (higher is better)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(140)
        .y_label_area_size(80)
        .build_cartesian_2d(0usize..n, 0f64..max * 1.1)?;
    let labels = scenarios.clone();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|i| labels.get(*i).cloned().unwrap_or_default())
        .x_label_style(
            ("sans-serif", 11)
                .into_font()
                .transform(FontTransform::Rotate90),
        )
        .y_desc("requests/s")
        .draw()?;
    let colours = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    for (k, (name, pts)) in series.iter().enumerate() {
        let c = colours[k % colours.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        chart.draw_series(PointSeries::of_element(
            pts.iter().copied(),
            4,
            c.filled(),
            &|p, s, st| Circle::new(p, s, st),
        ))?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    println!("wrote {}", args.svg.display());
    Ok(())
}
