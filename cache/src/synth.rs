//! Deterministic synthetic tasks and records, for the reliability tests (the writer
//! processes), the benchmarks and examples. Nothing here is used by the cache itself.
//!
//! Tasks are laid out as families of structural groups of exact tasks, like a model zoo:
//! `task(family, group, member)` has the family key of `family`, the structural key of
//! `(family, group)` and the exact key of all three; its extents grow with `member`.

use crate::model::{NewRecord, Provenance, TaskEntry, Trace};
use serde_json::json;
use tgc_canonicalize::{Features, TaskKey, TaskKeys};

/// A 64-bit mix (splitmix64): a cheap deterministic pseudo-random function.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn key(parts: &[u64]) -> TaskKey {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(&p.to_le_bytes());
    }
    let mut k = [0u8; 16];
    k.copy_from_slice(&h.finalize().as_bytes()[..16]);
    TaskKey(k)
}

/// The keys of a synthetic task.
pub fn keys(family: u64, group: u64, member: u64) -> TaskKeys {
    TaskKeys {
        exact: key(&[1, family, group, member]),
        structural: key(&[2, family, group]),
        family: key(&[3, family]),
    }
}

/// The features of a synthetic task: a conv-like extent vector that grows with `member`.
pub fn features(family: u64, group: u64, member: u64) -> Features {
    let c = 3.0 + (member % 5) as f64;
    let hw = 3.0 + ((member / 5) % 4) as f64;
    let k = 1.0 + (group % 3) as f64;
    let log2_extents = vec![
        0.0,
        c,
        hw,
        hw,
        c,
        c,
        k,
        k,
        0.0,
        c,
        hw,
        hw,
        (family % 4) as f64,
    ];
    let flops = 2f64.powf(1.0 + 2.0 * c + 2.0 * hw + 2.0 * k);
    let bytes = 4.0 * (2f64.powf(c + 2.0 * hw) * 2.0 + 2f64.powf(2.0 * c + 2.0 * k));
    Features {
        log2_extents,
        flops,
        bytes,
    }
}

/// A synthetic task entry (no TVM workload).
pub fn task(family: u64, group: u64, member: u64) -> TaskEntry {
    TaskEntry {
        keys: keys(family, group, member),
        features: features(family, group, member),
        workload: None,
    }
}

/// A MetaSchedule-shaped trace (tiling of a 4-loop nest) whose decisions derive from `tag`;
/// distinct tags give distinct traces.
pub fn trace(tag: u64) -> Trace {
    let r = mix(tag);
    let tile = |i: u32| -> serde_json::Value {
        let a = 1u64 << ((r >> (4 * i)) & 3);
        json!([a, 2, 1, 8 / a.min(8)])
    };
    let v = json!([
        [
            ["GetSBlock", [], ["conv2d_nchw", "main"], ["b0"]],
            ["GetLoops", ["b0"], [], ["l1", "l2", "l3", "l4"]],
            [
                "SamplePerfectTile",
                ["l1"],
                [4, 64],
                ["v5", "v6", "v7", "v8"]
            ],
            [
                "SamplePerfectTile",
                ["l2"],
                [4, 64],
                ["v9", "v10", "v11", "v12"]
            ],
            [
                "SampleCategorical",
                [],
                [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]],
                ["v13"]
            ],
            [
                "Annotate",
                ["b0", "v13"],
                ["meta_schedule.unroll_explicit"],
                []
            ]
        ],
        [[2, tile(0)], [3, tile(1)], [4, (r >> 8) % 4], [5, tag]]
    ]);
    Trace::from_json(&v).expect("a synthetic trace is well formed")
}

/// A latency in (100 us, 200 us) that is unique per tag for all practical purposes.
pub fn latency(tag: u64) -> f64 {
    1e-4 * (1.0 + (mix(tag ^ 0x5eed) >> 11) as f64 / (1u64 << 53) as f64)
}

/// A synthetic record of trace `tag` with three samples around [`latency`]`(tag)`.
pub fn record(tag: u64) -> NewRecord {
    let m = latency(tag);
    NewRecord {
        trace: trace(tag),
        latencies: vec![m * 0.99, m, m * 1.01],
        args_info: Some(json!([["TENSOR", "float32", [1, 8, 8, 8]]])),
        provenance: Provenance {
            model: Some("synthetic".into()),
            task_name: Some(format!("task_{}", tag % 1000)),
            trials: Some((tag % 64) as u32),
            created_at: Some(1_700_000_000 + tag as i64),
            source: "synthetic".into(),
        },
    }
}
