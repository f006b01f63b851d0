//! What the cache benches share: the layout of their synthetic records and their queries.
//! Like a model zoo tuned with best k = 32: families of 8 structural groups of 16 tasks,
//! 32 records per task, one target.

#![allow(dead_code)]

use tgc_cache::{synth, Cache, NewRecord, Target, TaskEntry, Toolchain};

pub const GROUPS_PER_FAMILY: u64 = 8;
pub const MEMBERS_PER_GROUP: u64 = 16;
pub const RECORDS_PER_TASK: u64 = 32;
/// Candidates per lookup.
pub const LIMIT: usize = 32;

pub fn target() -> Target {
    Target::parse(
        r#"{"kind":"llvm","keys":["cpu"],"mtriple":"x86_64-linux-gnu","num-cores":2,"tag":""}"#,
    )
    .unwrap()
}

/// Families needed for at least `records` records.
pub fn families(records: u64) -> u64 {
    records.div_ceil(GROUPS_PER_FAMILY * MEMBERS_PER_GROUP * RECORDS_PER_TASK)
}

/// Puts at least `records` records into `cache`, one transaction per family (4,096 records).
pub fn fill(cache: &mut Cache, records: u64) {
    let (target, tc) = (target(), Toolchain::pinned());
    let mut tag = 0u64;
    for f in 0..families(records) {
        let mut batch: Vec<(TaskEntry, Vec<NewRecord>)> = Vec::new();
        for g in 0..GROUPS_PER_FAMILY {
            for m in 0..MEMBERS_PER_GROUP {
                let recs = (0..RECORDS_PER_TASK)
                    .map(|_| {
                        tag += 1;
                        let mut r = synth::record(tag);
                        r.args_info = None;
                        r
                    })
                    .collect();
                batch.push((synth::task(f, g, m), recs));
            }
        }
        cache
            .put_batch(&target, &tc, batch.iter().map(|(t, r)| (t, r.as_slice())))
            .unwrap();
    }
}

/// The three lookups: an exact hit (a task in the cache), a new shape of a known structure
/// (exact miss: the structural tier ranks 15 neighbours' records), and a new structure of
/// a known family (the family tier).
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    ExactHit,
    NewShape,
    NewStructure,
}

pub const KINDS: [Kind; 3] = [Kind::ExactHit, Kind::NewShape, Kind::NewStructure];

/// The i-th query task of a kind.
pub fn query(kind: Kind, fams: u64, i: u64) -> TaskEntry {
    let r = synth::mix(i);
    let f = r % fams;
    let g = (r >> 20) % GROUPS_PER_FAMILY;
    match kind {
        Kind::ExactHit => synth::task(f, g, (r >> 40) % MEMBERS_PER_GROUP),
        Kind::NewShape => synth::task(f, g, MEMBERS_PER_GROUP + (r >> 40) % 8),
        Kind::NewStructure => synth::task(f, GROUPS_PER_FAMILY + (r >> 40) % 4, 0),
    }
}
