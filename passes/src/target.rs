//! Targets from their command-line spellings.
//!
//! `llvm` means this machine: the TVM worker fills in the CPU and triple its LLVM detects
//! (`tvm.target.codegen.llvm_get_system_cpu()`, `llvm_get_system_triple()`) and the physical
//! cores, so MetaSchedule tunes vectorized code for the host instead of generic x86-64.
//! Without TVM at hand (`tgc opt` running annotate-cache) the host cannot be named the way
//! LLVM names it, so the spelling carries a fingerprint of the host instead (CPU model,
//! feature flags, physical cores), and the cache resolves it to the canonical target that a
//! `tgc tune` run on such a host registered (`target_spellings`). Two machines share a
//! spelling only when their CPUs look the same, so a shared cache never maps one machine's
//! `llvm` to another's CPU.
//!
//! `llvm-generic` asks for portable code (no `mcpu`: generic for the triple), and a JSON
//! config is taken as written.

use serde_json::{json, Value};

/// The key of the host fingerprint in a spelled target; the worker replaces it by the
/// host's `mcpu`, `mtriple` and `num-cores`.
pub const HOST_KEY: &str = "tgc.host";

/// A target from its command-line spelling: `llvm` (this machine), `llvm-generic` (portable
/// code, this machine's cores), `cuda` (an H100/H200-class GPU, sm_90), or a JSON config as
/// `tvm.target.Target` takes it.
pub fn resolve_target(text: &str) -> Result<Value, String> {
    match text.trim() {
        "llvm" => Ok(json!({ "kind": "llvm", HOST_KEY: host_fingerprint() })),
        "llvm-generic" => Ok(json!({ "kind": "llvm", "num-cores": physical_cores() })),
        "cuda" => Ok(json!({ "kind": "cuda", "arch": "sm_90" })),
        json => {
            let v: Value = serde_json::from_str(json).map_err(|e| {
                format!("target '{json}' is not llvm, llvm-generic, cuda or a JSON config ({e})")
            })?;
            if v.get("kind").and_then(|k| k.as_str()).is_none() {
                return Err(format!("target '{json}' has no string \"kind\""));
            }
            Ok(v)
        }
    }
}

/// Physical cores of this machine (MetaSchedule's `num-cores`: one thread per core; SMT
/// siblings share the vector units), from /proc/cpuinfo's distinct (physical id, core id)
/// pairs; the logical count where that is not available.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return logical;
    };
    let mut cores = std::collections::BTreeSet::new();
    let (mut package, mut core) = (None, None);
    for line in info.lines().chain(std::iter::once("")) {
        if line.trim().is_empty() {
            if let (Some(p), Some(c)) = (package.take(), core.take()) {
                cores.insert((p, c));
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            match k.trim() {
                "physical id" => package = Some(v.trim().to_string()),
                "core id" => core = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    if cores.is_empty() {
        logical
    } else {
        cores.len().min(logical)
    }
}

/// What identifies this host's CPU for code generation: its model name, feature flags and
/// physical cores (FNV-1a over them, hex; stable across builds, unlike std's hasher).
pub fn host_fingerprint() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let mut flags: Vec<String> = field("flags")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    flags.sort();
    let text = format!(
        "{}|{}|{}|{}",
        std::env::consts::ARCH,
        field("model name"),
        flags.join(" "),
        physical_cores()
    );
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}-{h:016x}", std::env::consts::ARCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        let host = resolve_target("llvm").unwrap();
        assert_eq!(host["kind"], "llvm");
        assert_eq!(
            host[HOST_KEY],
            host_fingerprint(),
            "stable within a machine"
        );
        assert!(host.get("mcpu").is_none(), "the worker names the CPU");
        let generic = resolve_target("llvm-generic").unwrap();
        assert_eq!(
            generic,
            json!({"kind": "llvm", "num-cores": physical_cores()})
        );
        assert!(physical_cores() >= 1);
        assert_eq!(resolve_target("cuda").unwrap()["arch"], "sm_90");
        let own = resolve_target(r#"{"kind": "llvm", "mcpu": "znver3"}"#).unwrap();
        assert_eq!(own["mcpu"], "znver3");
        assert!(resolve_target("llvm-fast")
            .unwrap_err()
            .contains("not llvm, llvm-generic, cuda or a JSON config"));
        assert!(resolve_target(r#"{"mcpu": "x"}"#)
            .unwrap_err()
            .contains("no string"));
    }
}
