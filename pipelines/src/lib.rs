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
    &tgc_passes::convert_layout::INFO,
    &tgc_passes::cse::INFO,
    &tgc_passes::dce::INFO,
    &tgc_passes::pack_weights::INFO,
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
    build_pipeline_with(text, &Overrides::default(), pm)
}

/// What a driver changes in a pipeline it runs (`tgc tune` running `tgc-cpu` with the run's
/// cache, target and budget): options set on named passes, over what the text says, and
/// passes left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `(pass, option, value)`: the value as the pipeline syntax would write it.
    pub options: Vec<(&'static str, &'static str, String)>,
    /// Passes not run.
    pub skip: Vec<&'static str>,
    /// The run's opened cache, handed to every pass that reads the cache.
    pub cache: Option<tgc_passes::SharedCache>,
}

impl Overrides {
    pub fn set(mut self, pass: &'static str, option: &'static str, value: impl ToString) -> Self {
        self.options.push((pass, option, value.to_string()));
        self
    }

    pub fn skip(mut self, pass: &'static str) -> Self {
        self.skip.push(pass);
        self
    }

    pub fn cache(mut self, cache: tgc_passes::SharedCache) -> Self {
        self.cache = Some(cache);
        self
    }
}

/// [`build_pipeline`] with `overrides` applied to every pass they name, named pipelines
/// expanded.
pub fn build_pipeline_with(
    text: &str,
    overrides: &Overrides,
    pm: &mut PassManager,
) -> Result<(), PipelineParseError> {
    for element in parse_pipeline(text)? {
        if let Some((_, _, expansion)) = NAMED_PIPELINES.iter().find(|(n, _, _)| *n == element.name)
        {
            if !element.options.is_empty() {
                return Err(PipelineParseError {
                    column: element.column,
                    message: format!("named pipeline '{}' takes no options", element.name),
                });
            }
            build_pipeline_with(expansion, overrides, pm)?;
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
        if overrides.skip.contains(&info.name) {
            continue;
        }
        let mut written = element.options.clone();
        for (pass, option, value) in &overrides.options {
            if *pass == info.name {
                written.retain(|(k, _)| k != option);
                written.push((option.to_string(), value.clone()));
            }
        }
        let options = PassOptions::resolve(info, &written)
            .map_err(|message| PipelineParseError {
                column: element.column,
                message,
            })?
            .with_cache(overrides.cache.clone());
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
