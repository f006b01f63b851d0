//! tgc-tvm: the bridge to TVM.
//!
//! tgc owns every decision (partitioning, keys, cache, seeds, when a search stops); TVM is
//! reached through a Python worker (`tvm/python/tgc_worker`, pinned TVM 0.27) that speaks a versioned JSON-lines
//! protocol (`tvm/python/tgc_worker/PROTOCOL.md`), typed in [`protocol`]. This crate turns tgc tasks and modules
//! into the protocol's JSON ([`task_json`], [`module_json`]), writes the op schema the worker
//! checks task JSON against ([`op_schema`]), and runs the worker ([`Worker`]), so a worker
//! crash, a TVM error or a hang becomes one clear error naming the task instead of a stuck
//! tuning job.

mod json;
pub mod protocol;
mod worker;

pub use json::{module_json, op_schema, task_json, OP_SCHEMA_PATH};
pub use protocol::{
    Applied, BenchRequest, BenchResult, BuildRecord, BuildRecords, BuildRequest, BuildResult,
    Built, CandidateId, CostModelKind, Evaluator, ExportRequest, HelloResult, InputRole, Latency,
    LatencyRange, LowerRequest, LowerResult, Measurement, ModelInput, PrepareResult, ReplayMode,
    ReplayOutcome, ReplayRequest, ReplayResult, RpcDevices, RpcDevicesRequest, RpcTracker,
    SampleRequest, SampleResult, Seed, SeedReplay, SessionRecord, TargetResult, Tolerance, Trials,
    TuneClose, TuneClosed, TuneMeasure, TuneMeasured, TuneOpen, TuneOpened, TuneRecorded,
    TuneRecords, TuneSearch, TuneSearched, TuneSeeded, TuneSeeds, TuneWindowed, TuneWindows,
    PROTOCOL,
};
pub use worker::{
    decode_result, find_python, worker_dir, BridgeError, Timeouts, Versions, Worker, WorkerConfig,
};
