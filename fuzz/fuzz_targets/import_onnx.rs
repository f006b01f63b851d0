//! Any bytes into the ONNX frontend: an `ImportError` is fine, a panic is a bug, and so is a
//! module that imports but does not verify. A module that imports is printed too, so the
//! printer sees every shape of IR the frontend makes.
//!
//! Run from the repository root, seeded with the shared models and the small per-op graphs
//! of the tests:
//! ```sh
//! mkdir -p fuzz/corpus/import_onnx fuzz/seeds
//! TGC_ONNX_SEEDS=$PWD/fuzz/seeds cargo test -p tgc-ir --test onnx
//! RUSTC_BOOTSTRAP=1 cargo fuzz run import_onnx fuzz/corpus/import_onnx fuzz/seeds models -- -max_total_time=600
//! ```
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = tgc_ir::onnx::import_bytes(data, "fuzz.onnx", &[]) {
        if let Err(e) = tgc_ir::verify_module(&m) {
            panic!("imported module does not verify: {e}");
        }
        let _ = tgc_ir::text::print_module(&m);
    }
});
