//! Blessed before/after snapshots of passes (rustc's mir-opt `.diff` files in spirit): each
//! snapshot holds the input IR, the pipeline and the output IR, so a reviewer sees exactly
//! what a change to a pass does. Update with `INSTA_UPDATE=always cargo test -p tgc-tests`
//! (or `cargo insta review`) and read the diff before committing.

use tgc_ir::text::{parse_module, print_module};
use tgc_passes::{Instrumentation, PassManager};

fn run(pipeline: &str, input: &str) -> String {
    let mut module = parse_module(input, "snapshot-input").expect("snapshot input parses");
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline(pipeline, &mut pm).expect("pipeline parses");
    pm.run(&mut module, &mut std::io::sink())
        .expect("pipeline runs");
    format!(
        "// pipeline: {pipeline}\n// ---- before\n{input}// ---- after\n{}",
        print_module(&module)
    )
}

const REDUNDANT_BRANCHES: &str = r#"module @redundant {
  func @main(%x: tensor<1x32x28x28xf32>, %w: tensor<32x32x3x3xf32>, %b: tensor<1x32x1x1xf32>) -> (tensor<1x32x28x28xf32>, tensor<1x32x28x28xf32>) {
    %0 = nn.conv2d(%x, %w) {padding = [1, 1, 1, 1]} : tensor<1x32x28x28xf32>
    %1 = add(%0, %b) : tensor<1x32x28x28xf32>
    %2 = nn.relu(%1) : tensor<1x32x28x28xf32>
    %3 = nn.conv2d(%x, %w) {padding = [1, 1, 1, 1]} : tensor<1x32x28x28xf32>
    %4 = add(%b, %3) : tensor<1x32x28x28xf32>
    %5 = nn.relu(%4) : tensor<1x32x28x28xf32>
    %6 = sigmoid(%5) : tensor<1x32x28x28xf32>
    %7 = multiply(%2, %5) : tensor<1x32x28x28xf32>
    %8 = nn.max_pool2d(%7) {pool_size = [3, 3], padding = [1, 1, 1, 1]} : tensor<1x32x28x28xf32>
    return %7, %8
  }
}
"#;

const UNUSED_CHAIN: &str = r#"module @unused {
  func @main(%x: tensor<1x128x768xf32>, %w: tensor<768x768xf32>) -> tensor<1x128x768xf32> {
    %0 = matmul(%x, %w) : tensor<1x128x768xf32>
    %1 = nn.gelu(%0) : tensor<1x128x768xf32>
    %2 = reshape(%1) {shape = [128, 768]} : tensor<128x768xf32>
    %3 = permute_dims(%2) : tensor<768x128xf32>
    %4 = nn.softmax(%0) {axis = -1} : tensor<1x128x768xf32>
    return %4
  }
}
"#;

#[test]
fn cse_merges_redundant_branches() {
    insta::assert_snapshot!(run("cse", REDUNDANT_BRANCHES));
}

#[test]
fn cse_then_dce_cleans_redundant_branches() {
    insta::assert_snapshot!(run("cse,dce", REDUNDANT_BRANCHES));
}

#[test]
fn dce_removes_unused_chain() {
    insta::assert_snapshot!(run("dce", UNUSED_CHAIN));
}

#[test]
fn empty_pipeline_is_identity() {
    let out = run("", UNUSED_CHAIN);
    assert!(
        out.ends_with(&format!("// ---- after\n{UNUSED_CHAIN}")),
        "{out}"
    );
}
