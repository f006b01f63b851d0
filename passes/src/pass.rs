//! The `Pass` trait and the one declaration each pass makes of itself ([`PassInfo`]): its
//! kebab-case name, summary and typed options with defaults. The registry, the help text and
//! the textual pipeline parser are all derived from these declarations.

use std::fmt;
use tgc_ir::Module;

/// A transformation of a whole module.
pub trait Pass {
    /// The declaration this pass was created from.
    fn info(&self) -> &'static PassInfo;

    /// Runs the pass. An error means the module could not be transformed; the manager reports
    /// it with the pass name.
    fn run(&self, module: &mut Module) -> Result<(), PassError>;
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct PassError(pub String);

/// The type of a pass option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionKind {
    Int,
    Float,
    Bool,
    Str,
}

impl fmt::Display for OptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OptionKind::Int => "integer",
            OptionKind::Float => "number",
            OptionKind::Bool => "bool",
            OptionKind::Str => "string",
        })
    }
}

/// One option of a pass, declared once: `max-depth: integer = 256`.
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    pub name: &'static str,
    /// The default, which also gives the option's type. A `const` value, so a pass takes it
    /// from the same constant its library code defaults to (one home per default).
    pub default: OptionDefault,
    pub help: &'static str,
}

impl OptionSpec {
    pub fn kind(&self) -> OptionKind {
        self.default.kind()
    }
}

/// The default of a pass option.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptionDefault {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'static str),
}

impl OptionDefault {
    pub fn kind(self) -> OptionKind {
        match self {
            OptionDefault::Int(_) => OptionKind::Int,
            OptionDefault::Float(_) => OptionKind::Float,
            OptionDefault::Bool(_) => OptionKind::Bool,
            OptionDefault::Str(_) => OptionKind::Str,
        }
    }

    pub fn value(self) -> OptionValue {
        match self {
            OptionDefault::Int(v) => OptionValue::Int(v),
            OptionDefault::Float(v) => OptionValue::Float(v),
            OptionDefault::Bool(v) => OptionValue::Bool(v),
            OptionDefault::Str(v) => OptionValue::Str(v.to_string()),
        }
    }
}

/// A parsed option value.
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl OptionValue {
    /// Parses `text` as a value of `kind`.
    pub fn parse(kind: OptionKind, text: &str) -> Result<OptionValue, String> {
        match kind {
            OptionKind::Int => text
                .parse()
                .map(OptionValue::Int)
                .map_err(|_| "an integer".into()),
            OptionKind::Float => text
                .parse()
                .map(OptionValue::Float)
                .map_err(|_| "a number".into()),
            OptionKind::Bool => match text {
                "true" | "1" => Ok(OptionValue::Bool(true)),
                "false" | "0" => Ok(OptionValue::Bool(false)),
                _ => Err("true or false".into()),
            },
            OptionKind::Str => Ok(OptionValue::Str(text.to_string())),
        }
    }
}

impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Int(v) => write!(f, "{v}"),
            OptionValue::Float(v) => write!(f, "{v}"),
            OptionValue::Bool(v) => write!(f, "{v}"),
            OptionValue::Str(v) => f.write_str(v),
        }
    }
}

/// The options a pass is created with: every declared option, given or defaulted, and the
/// resources a driver hands its passes (the run's opened cache).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassOptions {
    values: Vec<(&'static str, OptionValue)>,
    #[cfg(feature = "cache")]
    cache: Option<tgc_cache::SharedCache>,
}

impl PassOptions {
    /// Builds the options of `info` from `given` (name, text) pairs, filling defaults. Errors
    /// name the pass, the option and what was expected.
    pub fn resolve(info: &PassInfo, given: &[(String, String)]) -> Result<PassOptions, String> {
        for (name, _) in given {
            if info.option(name).is_none() {
                return Err(if info.options.is_empty() {
                    format!("pass '{}' takes no options, got '{name}'", info.name)
                } else {
                    format!(
                        "unknown option '{name}' for pass '{}'; valid options: {}",
                        info.name,
                        info.options
                            .iter()
                            .map(|o| o.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                });
            }
        }
        let mut values = Vec::with_capacity(info.options.len());
        for spec in info.options {
            let value = match given.iter().rev().find(|(n, _)| n == spec.name) {
                None => spec.default.value(),
                Some((_, text)) => OptionValue::parse(spec.kind(), text).map_err(|expected| {
                    format!(
                        "option '{}' of pass '{}' expects {expected}, got '{text}'",
                        spec.name, info.name
                    )
                })?,
            };
            values.push((spec.name, value));
        }
        Ok(PassOptions {
            values,
            ..PassOptions::default()
        })
    }

    /// With the run's opened cache, which a pass that reads the cache (annotate-cache) uses
    /// instead of opening the location its options name.
    #[cfg(feature = "cache")]
    pub fn with_cache(mut self, cache: Option<tgc_cache::SharedCache>) -> PassOptions {
        self.cache = cache;
        self
    }

    /// The cache a driver handed the pass, if any.
    #[cfg(feature = "cache")]
    pub fn cache(&self) -> Option<&tgc_cache::SharedCache> {
        self.cache.as_ref()
    }

    pub fn get(&self, name: &str) -> Option<&OptionValue> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The integer option `name` (declared by the pass, so present after `resolve`).
    pub fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(OptionValue::Int(v)) => *v,
            other => panic!("pass option '{name}' is not a declared integer option: {other:?}"),
        }
    }

    pub fn float(&self, name: &str) -> f64 {
        match self.get(name) {
            Some(OptionValue::Float(v)) => *v,
            other => panic!("pass option '{name}' is not a declared number option: {other:?}"),
        }
    }

    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            Some(OptionValue::Bool(v)) => *v,
            other => panic!("pass option '{name}' is not a declared bool option: {other:?}"),
        }
    }

    pub fn str(&self, name: &str) -> &str {
        match self.get(name) {
            Some(OptionValue::Str(v)) => v,
            other => panic!("pass option '{name}' is not a declared string option: {other:?}"),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &OptionValue)> {
        self.values.iter().map(|(n, v)| (*n, v))
    }
}

/// The single declaration of a pass.
pub struct PassInfo {
    /// kebab-case name used in pipelines.
    pub name: &'static str,
    pub summary: &'static str,
    pub options: &'static [OptionSpec],
    /// Creates the pass from resolved options; may reject option values.
    pub create: fn(&PassOptions) -> Result<Box<dyn Pass>, String>,
}

impl PassInfo {
    pub fn option(&self, name: &str) -> Option<&OptionSpec> {
        self.options.iter().find(|o| o.name == name)
    }
}

impl fmt::Debug for PassInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}
