//! The plot of `tgc similarity --plot FILE`: the coverage heatmap at the study's level (left)
//! and the census bar chart, task occurrences and distinct keys at each level per model
//! (right), drawn with plotters to SVG, or to an RGB bitmap encoded as PNG.
//!
//! Text is laid out with a TrueType font read at run time (`$TGC_FONT`, else DejaVu Sans or
//! Liberation Sans from the usual system folders, else any `.ttf` under them); the SVG names
//! the family `sans-serif` and viewers render it with their own font.

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tgc_canonicalize::similarity::Study;
use tgc_canonicalize::Level;

/// What `--plot` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

/// The format named by the file's extension.
pub fn format_of(path: &Path) -> Result<Format> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(Format::Svg),
        Some(e) if e.eq_ignore_ascii_case("png") => Ok(Format::Png),
        _ => bail!(
            "{}: a plot is written as a .svg or .png file, not this extension",
            path.display()
        ),
    }
}

pub(crate) const FONT: &str = "sans-serif";
const CELL: u32 = 40;
const LABEL: u32 = 150;
const HEADER: u32 = 50;
const BAR_GROUP: u32 = 64;

/// Colours of the census bars: occurrences, then exact, structural, family.
const BAR_COLOURS: [RGBColor; 4] = [
    RGBColor(190, 190, 190),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

fn font_candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("TGC_FONT")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    ] {
        out.push(PathBuf::from(p));
    }
    for dir in ["/usr/share/fonts", "/usr/local/share/fonts"] {
        collect_ttf(Path::new(dir), 4, &mut out);
    }
    out
}

fn collect_ttf(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() && depth > 0 {
            collect_ttf(&p, depth - 1, out);
        } else if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("ttf")) {
            out.push(p);
        }
    }
}

/// Registers the first readable font as `sans-serif`, once per process.
pub(crate) fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            for path in font_candidates() {
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                // plotters keeps fonts for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
            Err(
                "no TrueType font found to lay out the plot's text (set TGC_FONT to a .ttf file, \
                 or install fonts-dejavu-core)"
                    .to_string(),
            )
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// The canvas: heatmap and bar chart side by side.
fn canvas_size(models: usize) -> (u32, u32, u32) {
    let n = models.max(1) as u32;
    let heatmap_width = (LABEL + n * CELL + 30).max(400);
    let bars_width = (90 + n * BAR_GROUP).max(420);
    let height = (HEADER + n * CELL + LABEL).max(420);
    (heatmap_width + bars_width, height, heatmap_width)
}

/// Draws the study's plot to `path` (SVG or PNG by extension).
pub fn draw(study: &Study, path: &Path) -> Result<()> {
    let format = format_of(path)?;
    ensure_font().with_context(|| format!("{}", path.display()))?;
    let (w, h, split) = canvas_size(study.models.len());
    let fail = |e: String| anyhow!("{}: cannot draw the plot: {e}", path.display());
    match format {
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
                draw_on(&root, study, split).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            std::fs::write(path, svg).with_context(|| format!("{}: cannot write", path.display()))
        }
        Format::Png => {
            let mut rgb = vec![0u8; (w * h * 3) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
                draw_on(&root, study, split).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            write_png(path, w, h, &rgb)
        }
    }
}

pub(crate) fn write_png(path: &Path, w: u32, h: u32, rgb: &[u8]) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("{}: cannot write", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let writer = encoder
        .write_header()
        .and_then(|mut wr| wr.write_image_data(rgb).map(|()| wr))
        .with_context(|| format!("{}: cannot write the PNG", path.display()))?;
    writer
        .finish()
        .with_context(|| format!("{}: cannot write the PNG", path.display()))?;
    Ok(())
}

fn draw_on<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    study: &Study,
    split: u32,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(split);
    heatmap(&left, study).map_err(|e| e.to_string())?;
    census_bars(&right, study).map_err(|e| e.to_string())?;
    Ok(())
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// White (0) to dark blue (1).
fn shade(v: f64) -> RGBColor {
    let v = v.clamp(0.0, 1.0);
    let mix = |lo: f64, hi: f64| (lo + (hi - lo) * v).round() as u8;
    RGBColor(mix(255.0, 8.0), mix(255.0, 48.0), mix(255.0, 107.0))
}

fn heatmap<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, study: &Study) -> DrawResult<DB> {
    let n = study.models.len() as i32;
    let (cell, label, header) = (CELL as i32, LABEL as i32, HEADER as i32);
    let title = format!("{} coverage", study.coverage.level.name());
    area.draw(&Text::new(
        title,
        (10, 8),
        (FONT, 18).into_font().color(&BLACK),
    ))?;
    let small = (FONT, 11).into_font();
    area.draw(&Text::new(
        "row: share of its task occurrences whose key occurs in column",
        (10, 30),
        small.color(&BLACK),
    ))?;
    for (r, row) in study.coverage.matrix.iter().enumerate() {
        let y = header + r as i32 * cell;
        area.draw(&Text::new(
            study.models[r].clone(),
            (label - 6, y + cell / 2),
            small.color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
        for (c, &v) in row.iter().enumerate() {
            let x = label + c as i32 * cell;
            area.draw(&Rectangle::new(
                [(x, y), (x + cell, y + cell)],
                shade(v).filled(),
            ))?;
            area.draw(&Rectangle::new(
                [(x, y), (x + cell, y + cell)],
                RGBColor(220, 220, 220).stroke_width(1),
            ))?;
            let ink = if v > 0.55 { &WHITE } else { &BLACK };
            area.draw(&Text::new(
                format!("{v:.2}"),
                (x + cell / 2, y + cell / 2),
                small.color(ink).pos(Pos::new(HPos::Center, VPos::Center)),
            ))?;
        }
    }
    for (c, name) in study.models.iter().enumerate() {
        let x = label + c as i32 * cell + cell / 2;
        area.draw(&Text::new(
            name.clone(),
            (x, header + n * cell + 6),
            small
                .transform(FontTransform::Rotate270)
                .color(&BLACK)
                .pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
    }
    Ok(())
}

fn census_bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, study: &Study) -> DrawResult<DB> {
    let n = study.models.len();
    let max = study
        .census
        .iter()
        .map(|c| c[0].occurrences)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "census: task occurrences, distinct keys per level",
            (FONT, 18),
        )
        .margin(10)
        .x_label_area_size(LABEL)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n.max(1) as f64, 0f64..max * 1.4)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("tasks")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 12))
        .draw()?;
    let series = [
        ("occurrences".to_string(), None),
        (Level::Exact.name().to_string(), Some(0usize)),
        (Level::Structural.name().to_string(), Some(1)),
        (Level::Family.name().to_string(), Some(2)),
    ];
    let width = 0.8 / series.len() as f64;
    for (k, (label, level)) in series.iter().enumerate() {
        let colour = BAR_COLOURS[k];
        let bars = study.census.iter().enumerate().map(move |(i, census)| {
            let value = match level {
                None => census[0].occurrences,
                Some(l) => census[*l].distinct,
            } as f64;
            let x0 = i as f64 + 0.1 + k as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width, value)], colour.filled())
        });
        chart
            .draw_series(bars)?
            .label(label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    let small = (FONT, 11).into_font();
    for (i, name) in study.models.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        let (ox, oy) = area.get_base_pixel();
        area.draw(&Text::new(
            name.clone(),
            (x - ox, y - oy + 6),
            small
                .transform(FontTransform::Rotate270)
                .color(&BLACK)
                .pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
    }
    Ok(())
}
