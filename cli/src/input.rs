//! Reading and writing modules: text IR from a file or stdin (`-`), output to a file or stdout.

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::path::Path;
use tgc_ir::Module;

/// Reads a module from `path` (`-` for stdin) as text IR.
pub fn read_module(path: &str) -> Result<Module> {
    let (src, name) = if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("<stdin>: cannot read")?;
        (s, "<stdin>".to_string())
    } else {
        let bytes = std::fs::read(path).with_context(|| format!("{path}: cannot read"))?;
        let s = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "{path}: not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            )
        })?;
        (s, path.to_string())
    };
    Ok(tgc_ir::text::parse_module(&src, &name)?)
}

/// Writes `text` to `out` (a path) or to stdout.
pub fn write_output(out: Option<&Path>, text: &str) -> Result<()> {
    match out {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("{}: cannot write", p.display()))
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (e.g. `| head`) is not an error worth reporting.
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("<stdout>: cannot write"),
            }
        }
    }
}

/// Loads a model: ONNX when the path ends in `.onnx`, MLIR (StableHLO) when it ends in
/// `.mlir`, text IR when it is a file (or `-`, stdin), else the zoo model of that name
/// (`tgc zoo --list`).
pub fn load_model(path: &str, shapes: &[(String, Vec<i64>)]) -> Result<Module> {
    if path.ends_with(".onnx") {
        return Ok(tgc_ir::onnx::import_file(Path::new(path), shapes)?);
    }
    if path.ends_with(".mlir") {
        if !shapes.is_empty() {
            anyhow::bail!(
                "{path}: --shape applies to ONNX models only (MLIR modules have static shapes)"
            );
        }
        return load_mlir(path);
    }
    if path != "-" && !Path::new(path).exists() {
        if let Some(model) = tgc_zoo::lookup(path) {
            if !shapes.is_empty() {
                anyhow::bail!(
                    "{path}: --shape applies to ONNX models only (zoo models have fixed shapes)"
                );
            }
            return model
                .build()
                .map_err(|e| anyhow::anyhow!("zoo model {path}: {e}"));
        }
        anyhow::bail!("{path}: no such file, and no zoo model of that name (see 'tgc zoo --list')");
    }
    if !shapes.is_empty() {
        anyhow::bail!("{path}: --shape applies to ONNX models only");
    }
    read_module(path)
}

#[cfg(feature = "mlir")]
fn load_mlir(path: &str) -> Result<Module> {
    Ok(tgc_ir::mlir::import_file(Path::new(path))?)
}

#[cfg(not(feature = "mlir"))]
fn load_mlir(path: &str) -> Result<Module> {
    anyhow::bail!(
        "{path}: this tgc was built without MLIR support (build with `--features mlir`, which needs LLVM/MLIR 22: scripts/deps.sh)"
    )
}

/// The layout a model's convolutions run in (`--layout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// As the model has them.
    #[default]
    Model,
    /// 2-D convolutions in NHWC with HWIO kernels (the `convert-layout` pass): on CPUs
    /// MetaSchedule's schedules for them run much faster. Kernels that are inputs of the
    /// model become HWIO inputs; the library's sidecar gives each one's permutation.
    Nhwc,
}

/// [`load_model`], then the model in `layout`, its contractions' weights marked for packing
/// with `pack_weights` (the `pack-weights` pass).
pub fn load_model_in(
    path: &str,
    shapes: &[(String, Vec<i64>)],
    layout: Layout,
    pack_weights: bool,
) -> Result<Module> {
    use tgc_passes::Pass;
    let mut module = load_model(path, shapes)?;
    let mut passes: Vec<Box<dyn Pass>> = Vec::new();
    if layout == Layout::Nhwc {
        passes.push(Box::new(tgc_passes::convert_layout::ConvertLayout));
    }
    if pack_weights {
        passes.push(Box::new(tgc_passes::pack_weights::PackWeights));
    }
    for pass in passes {
        let name = pass.info().name;
        pass.run(&mut module)
            .map_err(|e| anyhow::anyhow!("{path}: {name}: {}", e.0))?;
        tgc_ir::verify_module(&module)
            .map_err(|e| anyhow::anyhow!("{path}: {name} gave an invalid module: {e}"))?;
    }
    Ok(module)
}

/// Parses `NAME=1x3x224x224` for `--shape`.
pub fn parse_shape_arg(s: &str) -> Result<(String, Vec<i64>), String> {
    let (name, dims) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=DIMS (e.g. input=1x3x224x224)"))?;
    if name.is_empty() {
        return Err(format!("'{s}' has no input name before '='"));
    }
    let dims = dims
        .split('x')
        .map(|d| match d.parse::<i64>() {
            Ok(v) if v >= 0 => Ok(v),
            _ => Err(format!(
                "'{d}' in '{s}' is not a dimension (a non-negative integer)"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name.to_string(), dims))
}
