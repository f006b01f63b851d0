//! `tgc curves`: the plot of a whole-model benchmark (`scripts/bench_whole.py`'s
//! `bench.json`, schema `tgc.bench-whole/1`): per model, the model's latency against tuning
//! seconds, tgc's curve (a measured build after each piece) beside stock TVM's final point,
//! with onnxruntime and TVM's default schedules as horizontal lines. Log-scaled latency (the
//! defaults are tens of times the tuned models). SVG or PNG by the file's extension, drawn as
//! `tgc similarity --plot` draws (`crate::plot`).

use crate::plot::{ensure_font, format_of, write_png, Format, FONT};
use anyhow::{anyhow, Context, Result};
use clap::Args;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct CurvesArgs {
    /// The benchmark's `bench.json` (schema `tgc.bench-whole/1`).
    bench: PathBuf,
    /// The plot to write: `.svg` or `.png`.
    #[arg(short, long)]
    output: PathBuf,
}

/// One model's panel.
#[derive(Clone, Debug, PartialEq)]
struct Panel {
    name: String,
    /// (seconds, ms) after each tgc piece, from 0 s.
    tgc: Vec<(f64, f64)>,
    /// Stock TVM's tuning seconds and final latency.
    stock: Option<(f64, f64)>,
    onnxruntime_ms: f64,
    defaults_ms: f64,
}

const PANEL_W: u32 = 520;
const PANEL_H: u32 = 400;
const TGC: RGBColor = RGBColor(31, 119, 180);
const STOCK: RGBColor = RGBColor(214, 39, 40);
const ORT: RGBColor = RGBColor(44, 160, 44);
const DEFAULTS: RGBColor = RGBColor(127, 127, 127);

pub fn run(args: CurvesArgs) -> Result<()> {
    let format = format_of(&args.output)?;
    let text = std::fs::read_to_string(&args.bench)
        .with_context(|| format!("{}: cannot read", args.bench.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow!("{}: not JSON: {e}", args.bench.display()))?;
    let panels = panels(&doc).map_err(|e| anyhow!("{}: {e}", args.bench.display()))?;
    ensure_font().with_context(|| format!("{}", args.output.display()))?;
    draw(&panels, &args.output, format)?;
    println!(
        "{}: {} model(s) plotted",
        args.output.display(),
        panels.len()
    );
    Ok(())
}

/// The panels of a `tgc.bench-whole/1` document; a missing or mistyped field is an error
/// naming it.
fn panels(doc: &Value) -> Result<Vec<Panel>, String> {
    if doc["schema"] != "tgc.bench-whole/1" {
        return Err(format!("schema {} is not tgc.bench-whole/1", doc["schema"]));
    }
    let models = doc["models"].as_array().ok_or("no models list")?;
    let num = |v: &Value, what: &str| {
        v.as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or(format!("{what} is not a positive number: {v}"))
    };
    let mut out = Vec::with_capacity(models.len());
    for (i, m) in models.iter().enumerate() {
        let at = |f: &str| format!("models[{i}].{f}");
        let curve = m["curve"]
            .as_array()
            .ok_or(format!("{} is not a list", at("curve")))?;
        let mut tgc = Vec::with_capacity(curve.len());
        for (k, p) in curve.iter().enumerate() {
            let t = p[0]
                .as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .ok_or(format!("{}[{k}][0] is not seconds: {p}", at("curve")))?;
            tgc.push((t, num(&p[1], &format!("{}[{k}][1]", at("curve")))?));
        }
        if tgc.is_empty() {
            return Err(format!("{} is empty", at("curve")));
        }
        let stock = match &m["stock"] {
            Value::Null => None,
            s if s["latency_ms"].is_null() => None,
            s => Some((
                num(&s["tuning_s"], &at("stock.tuning_s"))?,
                num(&s["latency_ms"], &at("stock.latency_ms"))?,
            )),
        };
        out.push(Panel {
            name: Path::new(
                m["model"]
                    .as_str()
                    .ok_or(format!("{} is not a path", at("model")))?,
            )
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            tgc,
            stock,
            onnxruntime_ms: num(&m["onnxruntime_ms"], &at("onnxruntime_ms"))?,
            defaults_ms: num(&m["defaults_ms"], &at("defaults_ms"))?,
        });
    }
    if out.is_empty() {
        return Err("no models".into());
    }
    Ok(out)
}

fn draw(panels: &[Panel], path: &Path, format: Format) -> Result<()> {
    let (w, h) = (PANEL_W * panels.len() as u32, PANEL_H);
    let fail = |e: String| anyhow!("{}: cannot draw the plot: {e}", path.display());
    match format {
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
                draw_on(&root, panels).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            std::fs::write(path, svg).with_context(|| format!("{}: cannot write", path.display()))
        }
        Format::Png => {
            let mut rgb = vec![0u8; (w * h * 3) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
                draw_on(&root, panels).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            write_png(path, w, h, &rgb)
        }
    }
}

fn draw_on<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[Panel],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    for (area, p) in root.split_evenly((1, panels.len())).iter().zip(panels) {
        panel(area, p).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let t_max = p
        .tgc
        .iter()
        .map(|&(t, _)| t)
        .chain(p.stock.map(|(t, _)| t))
        .fold(1.0, f64::max)
        * 1.05;
    let lats = p
        .tgc
        .iter()
        .map(|&(_, l)| l)
        .chain(p.stock.map(|(_, l)| l))
        .chain([p.onnxruntime_ms, p.defaults_ms]);
    let (lo, hi) = lats.fold((f64::INFINITY, 0.0_f64), |(lo, hi), l| {
        (lo.min(l), hi.max(l))
    });
    let mut chart = ChartBuilder::on(area)
        .caption(&p.name, (FONT, 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..t_max, (lo * 0.8..hi * 1.25).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("tuning seconds")
        .y_desc("latency ms (log)")
        .label_style((FONT, 11))
        .draw()?;
    for (ms, colour, label) in [
        (p.defaults_ms, DEFAULTS, "TVM defaults"),
        (p.onnxruntime_ms, ORT, "onnxruntime"),
    ] {
        chart
            .draw_series(LineSeries::new(
                [(0.0, ms), (t_max, ms)],
                colour.stroke_width(1),
            ))?
            .label(format!("{label} {ms:.1} ms"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
    }
    chart
        .draw_series(LineSeries::new(p.tgc.iter().copied(), TGC.stroke_width(2)))?
        .label("tgc (a measured build per point)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], TGC.stroke_width(2)));
    chart.draw_series(p.tgc.iter().map(|&pt| Circle::new(pt, 4, TGC.filled())))?;
    if let Some(pt) = p.stock {
        chart
            .draw_series([Cross::new(pt, 7, STOCK.stroke_width(2))])?
            .label("stock tune_relax, final")
            .legend(|(x, y)| Cross::new((x + 8, y), 5, STOCK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 11))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"schema": "tgc.bench-whole/1", "models": [{
            "model": "/x/resnet50.onnx", "curve": [[0.0, 4300.0], [120.5, 160.0], [250.0, 90.0]],
            "onnxruntime_ms": 52.0, "defaults_ms": 4300.0,
            "stock": {"tuning_s": 900.0, "latency_ms": 120.0}}]})
    }

    #[test]
    fn a_benchmark_becomes_panels_and_bad_fields_are_named() {
        let p = panels(&doc()).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].name, "resnet50.onnx");
        assert_eq!(p[0].tgc, [(0.0, 4300.0), (120.5, 160.0), (250.0, 90.0)]);
        assert_eq!(p[0].stock, Some((900.0, 120.0)));
        let mut d = doc();
        d["models"][0]["stock"] = Value::Null;
        assert_eq!(panels(&d).unwrap()[0].stock, None);
        let mut d = doc();
        d["models"][0]["curve"][1][1] = json!("fast");
        assert!(panels(&d).unwrap_err().contains("models[0].curve[1][1]"));
        let mut d = doc();
        d["schema"] = json!("tgc.bench/1");
        assert!(panels(&d).unwrap_err().contains("not tgc.bench-whole/1"));
    }

    #[test]
    fn the_plot_is_an_svg_with_every_series() {
        ensure_font().expect("a font (scripts/deps.sh installs fonts-dejavu-core)");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        draw(&panels(&doc()).unwrap(), &path, Format::Svg).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for label in [
            "resnet50.onnx",
            "onnxruntime 52.0 ms",
            "TVM defaults 4300.0 ms",
            "stock tune_relax",
        ] {
            assert!(svg.contains(label), "{label} not in the plot");
        }
    }
}
