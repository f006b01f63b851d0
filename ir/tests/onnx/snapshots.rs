//! Snapshots of the IR imported from small exporter-style graphs: a conv block with batch
//! norm and a computed reshape, a classifier head with Gemm, and an NHWC input with Pad and
//! Resize. Update with `INSTA_UPDATE=always cargo test -p tgc-ir --test onnx` and review.

use crate::builder::*;
use onnx_protobuf::tensor_proto::DataType;

const F32: DataType = DataType::FLOAT;

fn printed(g: &Graph) -> String {
    tgc_ir::text::print_module(&g.ok())
}

#[test]
fn conv_batchnorm_relu_reshape() {
    let mut g = Graph::new(17);
    g.input("x", F32, &[1, 3, 8, 8])
        .input("w", F32, &[4, 3, 3, 3]);
    for p in ["gamma", "beta", "mean", "var"] {
        g.input(p, F32, &[4]);
    }
    g.node(
        "Conv",
        &["x", "w"],
        &["c"],
        vec![a_ints("pads", &[1, 1, 1, 1])],
    );
    g.node(
        "BatchNormalization",
        &["c", "gamma", "beta", "mean", "var"],
        &["bn"],
        vec![a_float("epsilon", 1e-3)],
    );
    g.node("Relu", &["bn"], &["r"], vec![]);
    // Target shape computed at run time from Shape -> Gather -> Concat, folded at import.
    g.node("Shape", &["r"], &["s"], vec![]);
    g.init_i64("zero", &[1], &[0]);
    g.node("Gather", &["s", "zero"], &["n"], vec![a_int("axis", 0)]);
    g.init_i64("minus_one", &[1], &[-1]);
    g.node(
        "Concat",
        &["n", "minus_one"],
        &["target"],
        vec![a_int("axis", 0)],
    );
    g.node("Reshape", &["r", "target"], &["y"], vec![]);
    g.output("y");
    insta::assert_snapshot!(printed(&g));
}

#[test]
fn gemm_classifier() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[1, 16])
        .input("w", F32, &[10, 16])
        .input("b", F32, &[10]);
    g.node(
        "Gemm",
        &["x", "w", "b"],
        &["z"],
        vec![a_int("transB", 1), a_float("alpha", 0.5)],
    );
    g.node("Softmax", &["z"], &["y"], vec![a_int("axis", -1)]);
    g.output("y");
    insta::assert_snapshot!(printed(&g));
}

#[test]
fn nhwc_pad_resize() {
    let mut g = Graph::new(17);
    g.input("x", F32, &[1, 6, 6, 2]);
    g.node(
        "Transpose",
        &["x"],
        &["t"],
        vec![a_ints("perm", &[0, 3, 1, 2])],
    );
    g.init_i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
    g.node("Pad", &["t", "pads"], &["p"], vec![]);
    g.init_f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]);
    g.node(
        "Resize",
        &["p", "", "scales"],
        &["y"],
        vec![a_str("mode", "nearest")],
    );
    g.output("y");
    insta::assert_snapshot!(printed(&g));
}
