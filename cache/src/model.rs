//! The values the cache stores and is queried with: targets, toolchains, traces, TVM
//! workloads, task descriptions and new records. All of them are data: the cache stores JSON
//! text and numbers, and nothing read back is ever executed or evaluated.

use crate::error::{CacheError, Result};
use serde_json::Value;
use std::fmt;
use std::fmt::Write as _;
use tgc_canonicalize::{Features, TaskKeys};

/// Serialises `v` compactly with object keys sorted at every level, whatever map type
/// serde_json was built with (another crate may turn on `preserve_order`).
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A compilation target: its JSON config with keys sorted at every level. Equal JSON means
/// the same target; sorting makes key order irrelevant, but defaults spelled out or not
/// (`{"kind": "llvm"}` vs TVM's `{"keys": ["cpu"], "kind": "llvm", "tag": "", ...}`) only
/// TVM can reconcile. So records are stored under TVM's canonical form (`Target.export()`,
/// what MetaSchedule records carry and what the worker's `target` method returns), and
/// `tgc tune` registers the spelling it was given as an alias of that form
/// ([`crate::Cache::register_target`]): lookups with a registered spelling, by processes
/// without TVM (`tgc opt`'s annotate-cache), find the same records.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    canonical: String,
    kind: String,
}

impl Target {
    /// A target from its JSON config; it must be an object with a string `kind`.
    pub fn from_json(v: &Value) -> Result<Target> {
        let kind = v
            .as_object()
            .and_then(|o| o.get("kind"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                CacheError::invalid(
                    "target",
                    format!("expected a JSON object with a string \"kind\", got {v}"),
                )
            })?
            .to_string();
        Ok(Target {
            canonical: canonical_json(v),
            kind,
        })
    }

    /// A target from JSON text.
    pub fn parse(text: &str) -> Result<Target> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| CacheError::invalid("target", format!("{e}: {text}")))?;
        Target::from_json(&v)
    }

    /// The canonical JSON text (sorted keys, compact).
    pub fn canonical_json(&self) -> &str {
        &self.canonical
    }

    /// The target kind (`llvm`, `cuda`, ...).
    pub fn kind(&self) -> &str {
        &self.kind
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical)
    }
}

/// The software that produced a record: the TVM, tvm-ffi and LLVM versions, as the TVM
/// worker reports them (`hello`). Traces replay reliably only under the toolchain that
/// recorded them, so it is part of every lookup: records of two toolchains never mix.
///
/// `llvm` is TVM's `llvm_version_major()` (`"22"` for the pinned wheel), `"none"` for a TVM
/// built without LLVM, and empty when unknown: records of caches from before schema version
/// 2 whose toolchain was not the pinned one, and imports named with the two-part form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Toolchain {
    pub tvm: String,
    pub tvm_ffi: String,
    pub llvm: String,
}

impl Toolchain {
    /// The TVM pinned by this project (see shared TVM_NOTES).
    pub const PINNED_TVM: &'static str = "0.27.0.post1";
    pub const PINNED_TVM_FFI: &'static str = "0.1.14.post1";
    /// The LLVM major version the pinned TVM wheel links (`llvm_version_major()`).
    pub const PINNED_LLVM: &'static str = "22";

    pub fn new(
        tvm: impl Into<String>,
        tvm_ffi: impl Into<String>,
        llvm: impl Into<String>,
    ) -> Toolchain {
        Toolchain {
            tvm: tvm.into(),
            tvm_ffi: tvm_ffi.into(),
            llvm: llvm.into(),
        }
    }

    /// The toolchain this project pins.
    pub fn pinned() -> Toolchain {
        Toolchain::new(Self::PINNED_TVM, Self::PINNED_TVM_FFI, Self::PINNED_LLVM)
    }

    /// Whether this is the pinned toolchain.
    pub fn is_pinned(&self) -> bool {
        *self == Toolchain::pinned()
    }

    /// Parses `TVM/TVM_FFI/LLVM`, the form `Display` prints, e.g.
    /// `0.27.0.post1/0.1.14.post1/22`; `TVM/TVM_FFI` means an unknown LLVM (empty `llvm`).
    pub fn parse(s: &str) -> Result<Toolchain> {
        let parts: Vec<&str> = s.split('/').map(str::trim).collect();
        match parts.as_slice() {
            [tvm, ffi, llvm] if !tvm.is_empty() && !ffi.is_empty() && !llvm.is_empty() => {
                Ok(Toolchain::new(*tvm, *ffi, *llvm))
            }
            [tvm, ffi] if !tvm.is_empty() && !ffi.is_empty() => Ok(Toolchain::new(*tvm, *ffi, "")),
            _ => Err(CacheError::invalid(
                "toolchain",
                format!(
                    "'{s}': expected TVM_VERSION/TVM_FFI_VERSION/LLVM_VERSION, e.g. {}",
                    Toolchain::pinned()
                ),
            )),
        }
    }
}

impl fmt::Display for Toolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.llvm.is_empty() {
            write!(f, "{}/{}", self.tvm, self.tvm_ffi)
        } else {
            write!(f, "{}/{}/{}", self.tvm, self.tvm_ffi, self.llvm)
        }
    }
}

/// A MetaSchedule trace: its canonical JSON (`[instructions, decisions]`, compact, keys
/// sorted) and the blake3 digest of that text, under which identical traces are stored once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    json: String,
    digest: TraceDigest,
}

impl Trace {
    /// A trace from its JSON value; it must be a two-element array.
    pub fn from_json(v: &Value) -> Result<Trace> {
        match v.as_array() {
            Some(parts) if parts.len() == 2 && parts[0].is_array() && parts[1].is_array() => {}
            _ => {
                return Err(CacheError::invalid(
                    "trace",
                    "expected [instructions, decisions]",
                ))
            }
        }
        let json = canonical_json(v);
        let digest = TraceDigest::of(&json);
        Ok(Trace { json, digest })
    }

    /// A trace from JSON text.
    pub fn parse(text: &str) -> Result<Trace> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| CacheError::invalid("trace", e.to_string()))?;
        Trace::from_json(&v)
    }

    /// A trace read back from the cache (already canonical; its digest was checked on write
    /// and is checked again by `verify`).
    pub(crate) fn from_stored(json: String, digest: TraceDigest) -> Trace {
        Trace { json, digest }
    }

    pub fn json(&self) -> &str {
        &self.json
    }

    pub fn digest(&self) -> TraceDigest {
        self.digest
    }
}

/// The blake3 digest of a trace's canonical JSON.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceDigest(pub [u8; 32]);

impl TraceDigest {
    pub fn of(canonical_json: &str) -> TraceDigest {
        TraceDigest(*blake3::hash(canonical_json.as_bytes()).as_bytes())
    }
}

impl fmt::Display for TraceDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            let _ = write!(s, "{b:02x}");
        }
        f.write_str(&s)
    }
}

impl fmt::Debug for TraceDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceDigest({self})")
    }
}

/// A TVM workload: the task's TVM module as TVM's JSON graph text (what `tvm.ir.save_json`
/// writes; MetaSchedule stores it base64-encoded) and its TVM structural hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub tvm_hash: u64,
    pub json: String,
}

/// A tgc task as the cache knows it: its keys, features and, once the bridge has lowered it,
/// its TVM workload.
#[derive(Clone, Debug)]
pub struct TaskEntry {
    pub keys: TaskKeys,
    pub features: Features,
    pub workload: Option<Workload>,
}

/// Where a record came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Provenance {
    /// The model being tuned.
    pub model: Option<String>,
    /// The task's name in that model.
    pub task_name: Option<String>,
    /// Trials the search had spent on the task when the record was measured.
    pub trials: Option<u32>,
    /// Unix seconds; `None` means now.
    pub created_at: Option<i64>,
    /// `tune`, `import:<dir>`, ...; empty means `tune`.
    pub source: String,
}

/// A measured trace to store.
#[derive(Clone, Debug)]
pub struct NewRecord {
    pub trace: Trace,
    /// Measured run times in seconds, each finite and positive.
    pub latencies: Vec<f64>,
    /// MetaSchedule's `args_info` JSON for the record, kept for export.
    pub args_info: Option<Value>,
    pub provenance: Provenance,
}

/// MetaSchedule's stub for a failed measurement (`kMaxMeanTime`).
pub const MS_INVALID_SECS: f64 = 1e10;

/// Checks latency samples and returns the record's latency: their median (stored in the
/// `mean_latency` column, which keeps its schema name).
pub(crate) fn record_latency(latencies: &[f64]) -> Result<f64> {
    if latencies.is_empty() {
        return Err(CacheError::invalid("latencies", "no samples"));
    }
    if let Some(bad) = latencies
        .iter()
        .find(|&&x| !(x.is_finite() && x > 0.0 && x < MS_INVALID_SECS))
    {
        return Err(CacheError::invalid(
            "latencies",
            format!("sample {bad} is not a positive, finite, valid time"),
        ));
    }
    // The median: `tgc tune` re-measures a task's best records with several fresh runs
    // before writing them back, and one slow run (another process on the core) must not
    // move the bar an exact hit is held to. For one or two samples it is the mean.
    let mut sorted = latencies.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    Ok(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// Features as stored in the `tasks.features_json` column.
pub(crate) fn features_to_json(f: &Features) -> String {
    let v =
        serde_json::json!({ "bytes": f.bytes, "flops": f.flops, "log2_extents": f.log2_extents });
    canonical_json(&v)
}

/// The stored form of [`Features`] (read straight into a struct: lookups parse many).
#[derive(serde::Deserialize)]
struct StoredFeatures {
    log2_extents: Vec<f64>,
    flops: f64,
    bytes: f64,
}

/// Reads the `tasks.features_json` column back.
pub(crate) fn features_from_json(text: &str) -> Option<Features> {
    let f: StoredFeatures = serde_json::from_str(text).ok()?;
    Some(Features {
        log2_extents: f.log2_extents,
        flops: f.flops,
        bytes: f.bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let v: Value = serde_json::from_str(r#"{"b": [1, {"z": 1, "a": 2.5}], "a": "x"}"#).unwrap();
        assert_eq!(canonical_json(&v), r#"{"a":"x","b":[1,{"a":2.5,"z":1}]}"#);
    }

    #[test]
    fn targets_with_reordered_keys_are_equal() {
        let a = Target::parse(r#"{"kind": "llvm", "num-cores": 2, "keys": ["cpu"]}"#).unwrap();
        let b = Target::parse(r#"{"keys": ["cpu"], "num-cores": 2, "kind": "llvm"}"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.kind(), "llvm");
        assert!(Target::parse(r#"{"num-cores": 2}"#).is_err());
        assert!(Target::parse("llvm").is_err());
    }

    #[test]
    fn identical_traces_have_one_digest() {
        let a = Trace::parse(r#"[[["GetSBlock", [], ["x", "main"], ["b0"]]], []]"#).unwrap();
        let b = Trace::parse(r#"[[["GetSBlock",[],["x","main"],["b0"]]],[]]"#).unwrap();
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), Trace::parse(r#"[[], []]"#).unwrap().digest());
        assert!(Trace::parse(r#"{"a": 1}"#).is_err());
    }

    #[test]
    fn toolchain_parses_its_display_form() {
        let t = Toolchain::pinned();
        assert_eq!(t.to_string(), "0.27.0.post1/0.1.14.post1/22");
        assert_eq!(Toolchain::parse(&t.to_string()).unwrap(), t);
        assert!(t.is_pinned());
        let other = Toolchain::new("0.28.0", "0.1.15", "20");
        assert_eq!(Toolchain::parse(&other.to_string()).unwrap(), other);
        assert!(!other.is_pinned());
        assert_eq!(
            Toolchain::parse(" 0.27.0.post1 / 0.1.14.post1 / 22 ").unwrap(),
            t
        );
        // The two-part form: LLVM unknown, printed back the same way.
        let legacy = Toolchain::parse("0.26.0/0.1.9").unwrap();
        assert_eq!(legacy, Toolchain::new("0.26.0", "0.1.9", ""));
        assert_eq!(legacy.to_string(), "0.26.0/0.1.9");
        assert_ne!(legacy, Toolchain::new("0.26.0", "0.1.9", "22"));
        for bad in ["0.27", "", "a//22", "/b/22", "a/b/", "a/b/c/d"] {
            let err = Toolchain::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains("TVM_VERSION/TVM_FFI_VERSION/LLVM_VERSION"),
                "{bad}: {err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn record_latency_is_the_median_of_valid_samples() {
        assert_eq!(record_latency(&[1.0, 3.0]).unwrap(), 2.0);
        // the median: one slow run does not move it
        assert_eq!(record_latency(&[1.0, 9.0, 1.2]).unwrap(), 1.2);
        assert_eq!(record_latency(&[1.0, 9.0, 1.2, 1.1]).unwrap(), 1.15);
        assert!(record_latency(&[]).is_err());
        assert!(record_latency(&[1.0, f64::NAN]).is_err());
        assert!(record_latency(&[MS_INVALID_SECS]).is_err());
        assert!(record_latency(&[-1.0]).is_err());
    }

    #[test]
    fn features_round_trip_through_json() {
        let f = Features {
            log2_extents: vec![0.0, 3.0, 3.5],
            flops: 1024.0,
            bytes: 96.0,
        };
        assert_eq!(features_from_json(&features_to_json(&f)), Some(f));
        assert_eq!(features_from_json("{}"), None);
    }
}
