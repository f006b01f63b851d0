//! tgc-pipelines: the registry of every pass and the textual pipeline syntax.
//!
//! A pipeline is a comma-separated list of pass names, each optionally followed by options in
//! braces, space-separated: `dce,cse,partition{max-depth=8}`. Option values may be quoted
//! (`"..."` or `'...'`) and may contain balanced braces. The registry is built from each
//! pass's single [`PassInfo`] declaration, so help text and parser cannot drift apart.

mod parse;

pub use parse::{parse_pipeline, PipelineElement, PipelineParseError};

use tgc_passes::{PassInfo, PassManager, PassOptions};

/// Every registered pass, in the order `tgc passes` lists them.
pub static PASSES: &[&PassInfo] = &[
    &tgc_passes::annotate_cache::INFO,
    &tgc_passes::canonicalize::INFO,
    &tgc_passes::cse::INFO,
    &tgc_passes::dce::INFO,
    &tgc_passes::partition::INFO,
    &tgc_passes::seed_schedules::INFO,
];

/// Named pipelines: a name that stands for a whole pipeline (options are not taken; the
/// cache comes from `$TGC_CACHE` or the user cache dir).
pub static NAMED_PIPELINES: &[(&str, &str, &str)] = &[
    (
        "tgc-cpu",
        "partition, key, look up and plan seeds for an llvm target",
        "partition,canonicalize,annotate-cache{target=llvm},seed-schedules",
    ),
    (
        "tgc-gpu",
        "partition, key, look up and plan seeds for a cuda target",
        "partition,canonicalize,annotate-cache{target=cuda},seed-schedules",
    ),
];

/// Looks a pass up by name.
pub fn lookup(name: &str) -> Option<&'static PassInfo> {
    PASSES.iter().copied().find(|p| p.name == name)
}

/// Comma-separated names of all passes, for error messages.
pub fn pass_names() -> String {
    PASSES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// Parses `text` and adds each pass, created with its resolved options, to `pm`.
pub fn build_pipeline(text: &str, pm: &mut PassManager) -> Result<(), PipelineParseError> {
    for element in parse_pipeline(text)? {
        if let Some((_, _, expansion)) = NAMED_PIPELINES.iter().find(|(n, _, _)| *n == element.name)
        {
            if !element.options.is_empty() {
                return Err(PipelineParseError {
                    column: element.column,
                    message: format!("named pipeline '{}' takes no options", element.name),
                });
            }
            build_pipeline(expansion, pm)?;
            continue;
        }
        let info = lookup(&element.name).ok_or_else(|| PipelineParseError {
            column: element.column,
            message: format!(
                "unknown pass '{}'; valid passes: {}; named pipelines: {}",
                element.name,
                pass_names(),
                NAMED_PIPELINES
                    .iter()
                    .map(|(n, _, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
        let options =
            PassOptions::resolve(info, &element.options).map_err(|message| PipelineParseError {
                column: element.column,
                message,
            })?;
        let pass = (info.create)(&options).map_err(|message| PipelineParseError {
            column: element.column,
            message,
        })?;
        pm.add(pass);
    }
    Ok(())
}

/// Help text for every pass: name, summary, options with types and defaults.
pub fn help_text() -> String {
    let mut out = String::new();
    for p in PASSES {
        out.push_str(&format!("  {:<20} {}\n", p.name, p.summary));
        for o in p.options {
            out.push_str(&format!(
                "      {}=<{}>  {} (default: {})\n",
                o.name,
                o.kind(),
                o.help,
                match o.default.value() {
                    tgc_passes::OptionValue::Str(s) if s.is_empty() => "\"\"".to_string(),
                    v => v.to_string(),
                }
            ));
        }
    }
    out.push_str("Named pipelines:\n");
    for (name, summary, expansion) in NAMED_PIPELINES {
        out.push_str(&format!("  {name:<20} {summary}\n      = {expansion}\n"));
    }
    out
}
