//! One test per ONNX op family, including the forms exporters really emit.

use crate::builder::*;
use tgc_ir::{Attr, Attrs};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn get<'a>(a: &'a Attrs, k: &str) -> &'a Attr {
    a.get(k)
        .unwrap_or_else(|| panic!("no attribute '{k}' in {a:?}"))
}

#[test]
fn conv_with_pads_bias_and_groups() {
    let mut g = Graph::new(17);
    g.input("x", F32, &[1, 8, 10, 10])
        .input("w", F32, &[8, 1, 3, 3])
        .input("b", F32, &[8]);
    g.node(
        "Conv",
        &["x", "w", "b"],
        &["y"],
        vec![
            a_ints("pads", &[1, 0, 1, 2]),
            a_ints("strides", &[2, 1]),
            a_int("group", 8),
        ],
    )
    .output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["nn.conv2d", "reshape", "add"]));
    let a = attrs_of(&m, "nn.conv2d");
    assert_eq!(get(a, "padding"), &Attr::ints([1, 0, 1, 2]));
    assert_eq!(get(a, "groups"), &Attr::Int(8));
    assert_eq!(
        get(attrs_of(&m, "reshape"), "shape"),
        &Attr::ints([1, 8, 1, 1])
    );
    assert_eq!(result_type(&m), "tensor<1x8x5x10xf32>");
}

#[test]
fn conv_auto_pad_same_pads_the_data_first_as_tvm_does() {
    for (mode, width, out) in [
        (
            "SAME_UPPER",
            [0, 0, 0, 0, 0, 1, 0, 1],
            "tensor<1x2x4x4xf32>",
        ),
        (
            "SAME_LOWER",
            [0, 0, 0, 0, 1, 0, 1, 0],
            "tensor<1x2x4x4xf32>",
        ),
    ] {
        let mut g = Graph::new(13);
        g.input("x", F32, &[1, 3, 8, 8])
            .input("w", F32, &[2, 3, 3, 3]);
        g.node(
            "Conv",
            &["x", "w"],
            &["y"],
            vec![a_str("auto_pad", mode), a_ints("strides", &[2, 2])],
        );
        g.output("y");
        let m = g.ok();
        assert_eq!(op_seq(&m), s(&["nn.pad", "nn.conv2d"]), "{mode}");
        assert_eq!(
            get(attrs_of(&m, "nn.pad"), "pad_width"),
            &Attr::ints(width),
            "{mode}"
        );
        assert_eq!(
            get(attrs_of(&m, "nn.conv2d"), "padding"),
            &Attr::ints([0, 0, 0, 0])
        );
        assert_eq!(result_type(&m), out);
    }
    let mut g = Graph::new(13);
    g.input("x", F32, &[1, 3, 8, 8])
        .input("w", F32, &[2, 3, 3, 3]);
    g.node(
        "Conv",
        &["x", "w"],
        &["y"],
        vec![a_str("auto_pad", "VALID"), a_ints("pads", &[1, 1, 1, 1])],
    );
    g.output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["nn.conv2d"]));
    assert_eq!(result_type(&m), "tensor<1x2x6x6xf32>");
}

#[test]
fn conv_transpose_with_output_padding_and_output_shape() {
    let mut g = Graph::new(17);
    g.input("x", F32, &[1, 4, 5, 5])
        .input("w", F32, &[4, 2, 3, 3]);
    g.node(
        "ConvTranspose",
        &["x", "w"],
        &["y"],
        vec![
            a_ints("strides", &[2, 2]),
            a_ints("pads", &[1, 1, 1, 1]),
            a_ints("output_padding", &[1, 1]),
        ],
    )
    .output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["nn.conv2d_transpose"]));
    assert_eq!(
        get(attrs_of(&m, "nn.conv2d_transpose"), "kernel_layout"),
        &Attr::str("IOHW")
    );
    assert_eq!(result_type(&m), "tensor<1x2x10x10xf32>");

    let mut g = Graph::new(17);
    g.input("x", F32, &[1, 4, 5, 5])
        .input("w", F32, &[4, 2, 3, 3])
        .input("b", F32, &[2]);
    g.node(
        "ConvTranspose",
        &["x", "w", "b"],
        &["y"],
        vec![
            a_ints("strides", &[2, 2]),
            a_ints("output_shape", &[10, 10]),
            a_str("auto_pad", "SAME_UPPER"),
        ],
    )
    .output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["nn.conv2d_transpose", "reshape", "add"]));
    assert_eq!(
        get(attrs_of(&m, "nn.conv2d_transpose"), "padding"),
        &Attr::ints([0, 0, 1, 1])
    );
    assert_eq!(result_type(&m), "tensor<1x2x10x10xf32>");
}

#[test]
fn gemm_with_transposes_alpha_and_beta_follows_tvm() {
    let mut g = Graph::new(13);
    g.input("a", F32, &[3, 2])
        .input("b", F32, &[4, 3])
        .input("c", F32, &[4]);
    g.node(
        "Gemm",
        &["a", "b", "c"],
        &["y"],
        vec![
            a_int("transA", 1),
            a_int("transB", 1),
            a_float("alpha", 0.5),
            a_float("beta", 2.0),
        ],
    )
    .output("y");
    let m = g.ok();
    assert_eq!(
        op_seq(&m),
        s(&[
            "constant",
            "multiply",
            "permute_dims",
            "permute_dims",
            "matmul",
            "constant",
            "multiply",
            "add"
        ])
    );
    assert_eq!(result_type(&m), "tensor<2x4xf32>");

    // A small constant B is transposed at import time; a big one stays a parameter.
    let mut g = Graph::new(13);
    g.input("a", F32, &[1, 3])
        .init_f32("b", &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    g.init_raw_f32("big", &[300, 2]);
    g.node("Gemm", &["a", "b"], &["y"], vec![a_int("transB", 1)]);
    g.node("Gemm", &["y", "big"], &["z"], vec![a_int("transB", 1)]);
    g.output("z");
    let m = g.ok();
    assert_eq!(
        op_seq(&m),
        s(&["constant", "matmul", "permute_dims", "matmul"])
    );
    assert_eq!(result_type(&m), "tensor<1x300xf32>");
    let f = main_fn(&m);
    assert_eq!(
        f.params.len(),
        2,
        "the 600-element weight becomes a parameter"
    );
    assert_eq!(f.ty(f.params[1]).to_string(), "tensor<300x2xf32>");
    assert_eq!(
        get(attrs_of(&m, "constant"), "value"),
        &Attr::floats([1., 4., 2., 5., 3., 6.])
    );
}

#[test]
fn matmul_of_any_rank() {
    let mut g = Graph::new(17);
    g.input("a", F32, &[2, 5, 3, 4])
        .input("b", F32, &[4, 6])
        .input("v", F32, &[6]);
    g.node("MatMul", &["a", "b"], &["y"], vec![])
        .node("MatMul", &["y", "v"], &["z"], vec![]);
    g.output("z");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["matmul", "matmul"]));
    assert_eq!(result_type(&m), "tensor<2x5x3xf32>");
}

#[test]
fn batch_norm_is_decomposed_like_tvm_decompose_ops_for_inference() {
    let mut g = Graph::new(15);
    g.input("x", F32, &[1, 4, 3, 3]);
    for p in ["gamma", "beta", "mean", "var"] {
        g.input(p, F32, &[4]);
    }
    g.node(
        "BatchNormalization",
        &["x", "gamma", "beta", "mean", "var"],
        &["y"],
        vec![a_float("epsilon", 1e-3)],
    );
    g.output("y");
    let m = g.ok();
    assert_eq!(
        op_seq(&m),
        // Post-order of the decomposed expression, as TVM's frontend binds nested calls.
        s(&[
            "expand_dims",
            "subtract",
            "expand_dims",
            "constant",
            "add",
            "sqrt",
            "divide",
            "expand_dims",
            "multiply",
            "expand_dims",
            "add"
        ])
    );
    assert_eq!(
        get(attrs_of(&m, "expand_dims"), "axis"),
        &Attr::ints([0, 2, 3])
    );
    assert_eq!(result_type(&m), "tensor<1x4x3x3xf32>");
    assert!(!op_seq(&m).contains(&"nn.batch_norm".to_string()));

    // Constant statistics fold, as TVM's FoldConstant does after the decomposition.
    let mut g = Graph::new(15);
    g.input("x", F32, &[1, 2, 3, 3]);
    g.init_f32("gamma", &[2], &[1., 2.])
        .init_f32("beta", &[2], &[0., 1.]);
    g.init_f32("mean", &[2], &[0., 0.5])
        .init_f32("var", &[2], &[3., 0.]);
    g.node(
        "BatchNormalization",
        &["x", "gamma", "beta", "mean", "var"],
        &["y"],
        vec![a_float("epsilon", 1.0)],
    );
    g.output("y");
    let m = g.ok();
    assert_eq!(
        op_seq(&m),
        s(&[
            "constant", "subtract", "constant", "divide", "constant", "multiply", "constant", "add"
        ])
    );
    let f = main_fn(&m);
    let std = &f.bindings[2];
    assert_eq!(get(&std.attrs, "value"), &Attr::floats([2.0, 1.0]));
    assert_eq!(get(&std.attrs, "shape"), &Attr::ints([1, 2, 1, 1]));
}

#[test]
fn transpose_and_reshape_with_a_shape_computed_at_run_time() {
    // x: 2x3x4 -> y = reshape(x, [Shape(x)[0], -1]) through Shape, Gather, Unsqueeze, Concat.
    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 3, 4])
        .init_i64("zero", &[], &[0])
        .init_i64("minus1", &[1], &[-1]);
    g.init_i64("axes0", &[1], &[0]);
    g.node("Shape", &["x"], &["shape"], vec![]);
    g.node("Gather", &["shape", "zero"], &["batch"], vec![]);
    g.node("Unsqueeze", &["batch", "axes0"], &["batch1"], vec![]);
    g.node(
        "Concat",
        &["batch1", "minus1"],
        &["target"],
        vec![a_int("axis", 0)],
    );
    g.node("Cast", &["target"], &["target64"], vec![a_int("to", 7)]);
    g.node("Reshape", &["x", "target64"], &["r"], vec![]);
    g.node("Transpose", &["r"], &["y"], vec![a_ints("perm", &[1, 0])]);
    g.output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["reshape", "permute_dims"]));
    assert_eq!(get(attrs_of(&m, "reshape"), "shape"), &Attr::ints([2, 12]));
    assert_eq!(result_type(&m), "tensor<12x2xf32>");

    // A 0 in the target copies the input's extent unless allowzero is set.
    let mut g = Graph::new(14);
    g.input("x", F32, &[2, 3, 4]).init_i64("t", &[2], &[0, -1]);
    g.node("Reshape", &["x", "t"], &["y"], vec![]).output("y");
    assert_eq!(result_type(&g.ok()), "tensor<2x12xf32>");
}

#[test]
fn flatten_squeeze_unsqueeze() {
    let mut g = Graph::new(11);
    g.input("x", F32, &[2, 1, 3, 1]);
    g.node("Squeeze", &["x"], &["a"], vec![a_ints("axes", &[-1])]);
    g.node("Unsqueeze", &["a"], &["b"], vec![a_ints("axes", &[0, 4])]);
    g.node("Flatten", &["b"], &["y"], vec![a_int("axis", -2)]);
    g.output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["squeeze", "expand_dims", "reshape"]));
    assert_eq!(get(attrs_of(&m, "squeeze"), "axis"), &Attr::ints([3]));
    assert_eq!(
        get(attrs_of(&m, "expand_dims"), "axis"),
        &Attr::ints([0, 4])
    );
    assert_eq!(get(attrs_of(&m, "reshape"), "shape"), &Attr::ints([2, 3]));

    // Opset 13: axes as inputs; Squeeze without axes drops every 1.
    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 1, 3, 1]).init_i64("ax", &[1], &[1]);
    g.node("Squeeze", &["x"], &["a"], vec![]);
    g.node("Unsqueeze", &["a", "ax"], &["y"], vec![]);
    g.output("y");
    let m = g.ok();
    assert_eq!(get(attrs_of(&m, "squeeze"), "axis"), &Attr::ints([1, 3]));
    assert_eq!(result_type(&m), "tensor<2x1x3xf32>");
}

#[test]
fn split_and_slice_with_tensor_inputs() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[6, 4])
        .init_i64("sizes", &[3], &[1, 2, 3]);
    g.node(
        "Split",
        &["x", "sizes"],
        &["a", "b", "c"],
        vec![a_int("axis", 0)],
    );
    g.output("c").output("b");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["split"]));
    assert_eq!(
        get(attrs_of(&m, "split"), "indices_or_sections"),
        &Attr::ints([1, 3])
    );
    let f = main_fn(&m);
    assert_eq!(
        f.result_types()
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>(),
        ["tensor<3x4xf32>", "tensor<2x4xf32>"]
    );
    assert_eq!(f.name_of(f.results[0]), "c");

    // Equal split, opset 11 attribute form and opset 18 uneven num_outputs.
    let mut g = Graph::new(11);
    g.input("x", F32, &[6, 4]);
    g.node("Split", &["x"], &["a", "b"], vec![a_int("axis", -1)])
        .output("a");
    let m = g.ok();
    assert_eq!(
        get(attrs_of(&m, "split"), "indices_or_sections"),
        &Attr::Int(2)
    );
    let mut g = Graph::new(18);
    g.input("x", F32, &[7]);
    g.node(
        "Split",
        &["x"],
        &["a", "b", "c"],
        vec![a_int("num_outputs", 3)],
    )
    .output("c");
    let m = g.ok();
    assert_eq!(
        get(attrs_of(&m, "split"), "indices_or_sections"),
        &Attr::ints([3, 6])
    );
    assert_eq!(result_type(&m), "tensor<1xf32>");

    let mut g = Graph::new(13);
    g.input("x", F32, &[10, 8]);
    g.init_i64("starts", &[2], &[-1, 1])
        .init_i64("ends", &[2], &[i64::MIN, 100]);
    g.init_i64("axes", &[2], &[0, -1])
        .init_i64("steps", &[2], &[-3, 2]);
    g.node(
        "Slice",
        &["x", "starts", "ends", "axes", "steps"],
        &["y"],
        vec![],
    )
    .output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["strided_slice"]));
    let a = attrs_of(&m, "strided_slice");
    assert_eq!(get(a, "begin"), &Attr::ints([9, 1]));
    assert_eq!(get(a, "end"), &Attr::ints([-11, 8]));
    assert_eq!(result_type(&m), "tensor<4x4xf32>");
}

#[test]
fn softmax_before_opset_13_flattens_around_the_axis() {
    let mut g = Graph::new(11);
    g.input("x", F32, &[2, 3, 4]);
    g.node("Softmax", &["x"], &["y"], vec![]).output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["reshape", "nn.softmax", "reshape"]));
    assert_eq!(get(attrs_of(&m, "reshape"), "shape"), &Attr::ints([2, 12]));
    assert_eq!(result_type(&m), "tensor<2x3x4xf32>");

    let mut g = Graph::new(11);
    g.input("x", F32, &[2, 3]);
    g.node("LogSoftmax", &["x"], &["y"], vec![]).output("y");
    assert_eq!(op_seq(&g.ok()), s(&["nn.log_softmax"]));

    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 3, 4]);
    g.node("Softmax", &["x"], &["y"], vec![a_int("axis", 1)])
        .output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["nn.softmax"]));
    assert_eq!(get(attrs_of(&m, "nn.softmax"), "axis"), &Attr::Int(1));
}

#[test]
fn layer_norm_with_and_without_bias() {
    let mut g = Graph::new(17);
    g.input("x", F32, &[2, 5, 8])
        .input("g", F32, &[5, 8])
        .input("b", F32, &[5, 8]);
    g.node(
        "LayerNormalization",
        &["x", "g", "b"],
        &["y"],
        vec![a_int("axis", 1), a_float("epsilon", 1e-6)],
    );
    g.output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["nn.layer_norm"]));
    assert_eq!(
        get(attrs_of(&m, "nn.layer_norm"), "axes"),
        &Attr::ints([1, 2])
    );

    let mut g = Graph::new(17);
    g.input("x", F32, &[2, 8]).input("g", F32, &[8]);
    g.node("LayerNormalization", &["x", "g"], &["y"], vec![])
        .output("y");
    assert_eq!(op_seq(&g.ok()), s(&["constant", "nn.layer_norm"]));
}

#[test]
fn pad_as_input_as_attribute_with_modes_and_axes() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[1, 2, 4, 4])
        .init_i64("pads", &[8], &[0, 0, 1, 2, 0, 0, 3, 4]);
    g.init_f32("v", &[], &[1.5]);
    g.node("Pad", &["x", "pads", "v"], &["y"], vec![])
        .output("y");
    let m = g.ok();
    let a = attrs_of(&m, "nn.pad");
    assert_eq!(get(a, "pad_width"), &Attr::ints([0, 0, 0, 0, 1, 3, 2, 4]));
    assert_eq!(get(a, "pad_value"), &Attr::Float(1.5));
    assert_eq!(result_type(&m), "tensor<1x2x8x10xf32>");

    let mut g = Graph::new(10);
    g.input("x", F32, &[3, 4]);
    g.node(
        "Pad",
        &["x"],
        &["y"],
        vec![a_ints("pads", &[1, 0, 1, 0]), a_float("value", 2.0)],
    );
    g.output("y");
    let m = g.ok();
    assert_eq!(get(attrs_of(&m, "nn.pad"), "pad_value"), &Attr::Float(2.0));
    assert_eq!(result_type(&m), "tensor<5x4xf32>");

    let mut g = Graph::new(18);
    g.input("x", F32, &[3, 4])
        .init_i64("pads", &[2], &[2, 1])
        .init_i64("axes", &[1], &[-1]);
    g.node(
        "Pad",
        &["x", "pads", "", "axes"],
        &["y"],
        vec![a_str("mode", "reflect")],
    )
    .output("y");
    let m = g.ok();
    assert_eq!(
        get(attrs_of(&m, "nn.pad"), "pad_width"),
        &Attr::ints([0, 0, 2, 1])
    );
    assert_eq!(result_type(&m), "tensor<3x7xf32>");

    // All-zero pads are the identity.
    let mut g = Graph::new(13);
    g.input("x", F32, &[3]).init_i64("pads", &[2], &[0, 0]);
    g.node("Pad", &["x", "pads"], &["y"], vec![])
        .node("Relu", &["y"], &["z"], vec![])
        .output("z");
    assert_eq!(op_seq(&g.ok()), s(&["nn.relu"]));
}

/// ONNX `edge` is Relax's `replicate` (legalize_ops/nn.py accepts constant, reflect,
/// replicate, circular); the op table still checks for `edge`.
#[test]
fn pad_edge_and_wrap_modes_use_relax_names() {
    for (onnx, relax) in [("edge", "replicate"), ("wrap", "circular")] {
        let mut g = Graph::new(19);
        g.input("x", F32, &[3, 4])
            .init_i64("pads", &[4], &[1, 0, 1, 0]);
        g.node("Pad", &["x", "pads"], &["y"], vec![a_str("mode", onnx)])
            .output("y");
        let m = g.ok();
        assert_eq!(get(attrs_of(&m, "nn.pad"), "pad_mode"), &Attr::str(relax));
        assert_eq!(result_type(&m), "tensor<5x4xf32>");
    }
}

#[test]
fn resize_with_scales_or_sizes() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[1, 3, 10, 12])
        .init_f32("scales", &[4], &[1.0, 1.0, 2.0, 1.5]);
    g.node(
        "Resize",
        &["x", "", "scales"],
        &["y"],
        vec![
            a_str("mode", "linear"),
            a_str("coordinate_transformation_mode", "align_corners"),
        ],
    )
    .output("y");
    let m = g.ok();
    let a = attrs_of(&m, "image.resize2d");
    assert_eq!(get(a, "size"), &Attr::ints([20, 18]));
    assert_eq!(get(a, "method"), &Attr::str("linear"));
    assert_eq!(
        get(a, "coordinate_transformation_mode"),
        &Attr::str("align_corners")
    );
    assert_eq!(result_type(&m), "tensor<1x3x20x18xf32>");

    let mut g = Graph::new(19);
    g.input("x", F32, &[1, 3, 10, 12])
        .init_i64("sizes", &[4], &[1, 3, 5, 7]);
    g.init_f32("roi", &[0], &[]).init_f32("scales", &[0], &[]);
    g.node(
        "Resize",
        &["x", "roi", "scales", "sizes"],
        &["y"],
        vec![
            a_str("mode", "cubic"),
            a_float("cubic_coeff_a", -0.5),
            a_str("nearest_mode", "floor"),
        ],
    )
    .output("y");
    let m = g.ok();
    let a = attrs_of(&m, "image.resize2d");
    assert_eq!(get(a, "method"), &Attr::str("cubic"));
    assert_eq!(get(a, "cubic_alpha"), &Attr::Float(-0.5));
    assert_eq!(
        get(a, "coordinate_transformation_mode"),
        &Attr::str("half_pixel")
    );
    assert_eq!(result_type(&m), "tensor<1x3x5x7xf32>");

    // Resize-10: (X, scales), nearest, asymmetric.
    let mut g = Graph::new(10);
    g.input("x", F32, &[1, 1, 2, 2])
        .init_f32("scales", &[4], &[1.0, 1.0, 3.0, 3.0]);
    g.node("Resize", &["x", "scales"], &["y"], vec![])
        .output("y");
    let m = g.ok();
    let a = attrs_of(&m, "image.resize2d");
    assert_eq!(get(a, "method"), &Attr::str("nearest_neighbor"));
    assert_eq!(
        get(a, "coordinate_transformation_mode"),
        &Attr::str("asymmetric")
    );
    assert_eq!(result_type(&m), "tensor<1x1x6x6xf32>");
}

#[test]
fn clip_with_bounds_as_inputs_or_attributes() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[4])
        .init_f32("lo", &[], &[0.0])
        .init_f32("hi", &[], &[6.0]);
    g.node("Clip", &["x", "lo", "hi"], &["a"], vec![]);
    g.node("Clip", &["a", "", "hi"], &["b"], vec![]);
    g.node("Clip", &["b"], &["y"], vec![]);
    g.output("y");
    let m = g.ok();
    // Known bounds from inputs: clip with tensor bounds (TVM reads them from rank-0 tensors),
    // an absent one infinite; no bound at all is the identity.
    assert_eq!(op_seq(&m), s(&["clip", "clip"]));
    let f = m.function("main").unwrap();
    let bounds: Vec<(&Attr, &Attr, &Attr)> = f
        .bindings
        .iter()
        .map(|b| {
            let a = &b.attrs;
            (get(a, "min"), get(a, "max"), get(a, "tensor_bounds"))
        })
        .collect();
    assert_eq!(
        bounds,
        vec![
            (&Attr::Float(0.0), &Attr::Float(6.0), &Attr::Bool(true)),
            (
                &Attr::Float(f64::NEG_INFINITY),
                &Attr::Float(6.0),
                &Attr::Bool(true)
            ),
        ]
    );

    // Attributes (before opset 11): maximum then minimum by scalar constants (immediates
    // of the TIR, as TVM writes them), an absent bound infinite.
    let mut g = Graph::new(6 + 4);
    g.input("x", F32, &[4]);
    g.node("Clip", &["x"], &["y"], vec![a_float("min", -1.0)])
        .output("y");
    let m = g.ok();
    assert_eq!(
        op_seq(&m),
        s(&["constant", "maximum", "constant", "minimum"])
    );
    let f = m.function("main").unwrap();
    let values: Vec<&Attr> = f
        .bindings
        .iter()
        .filter(|b| b.callee.op().is_some_and(|o| o.name() == "constant"))
        .map(|b| get(&b.attrs, "value"))
        .collect();
    assert_eq!(
        values,
        vec![
            &Attr::List(vec![Attr::Float(-1.0)]),
            &Attr::List(vec![Attr::Float(f64::INFINITY)])
        ]
    );

    // A bound computed at run time becomes maximum/minimum with that value.
    let mut g = Graph::new(13);
    g.input("x", F32, &[4]).input("lo", F32, &[]);
    g.node("Clip", &["x", "lo"], &["y"], vec![]).output("y");
    assert_eq!(op_seq(&g.ok()), s(&["maximum"]));
}

#[test]
fn gather_take_with_constant_or_run_time_indices() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[5, 3])
        .init_i64("idx", &[2], &[-1, 0])
        .input("j", I64, &[2, 2]);
    g.node("Gather", &["x", "idx"], &["a"], vec![]);
    g.node("Gather", &["a", "j"], &["y"], vec![a_int("axis", 1)]);
    g.output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["constant", "take", "take"]));
    let f = main_fn(&m);
    assert_eq!(get(&f.bindings[0].attrs, "value"), &Attr::ints([4, 0]));
    assert_eq!(result_type(&m), "tensor<2x2x2xf32>");

    // A scalar index drops the axis.
    let mut g = Graph::new(13);
    g.input("x", F32, &[5, 3]).init_i64("i", &[], &[2]);
    g.node("Gather", &["x", "i"], &["y"], vec![]).output("y");
    assert_eq!(result_type(&g.ok()), "tensor<3xf32>");
}

#[test]
fn concat_cast_and_constants() {
    let mut g = Graph::new(13);
    g.input("a", F32, &[2, 3]).input("b", F32, &[2, 5]);
    g.node("Concat", &["a", "b"], &["c"], vec![a_int("axis", -1)]);
    g.node("Cast", &["c"], &["d"], vec![a_int("to", 10)]);
    g.node("Cast", &["d"], &["y"], vec![a_int("to", 10)]);
    g.output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["concat", "astype"]));
    assert_eq!(get(attrs_of(&m, "astype"), "dtype"), &Attr::str("float16"));
    assert_eq!(result_type(&m), "tensor<2x8xf16>");

    // Constant, ConstantOfShape (small: folded; big: broadcast_to), Shape with start, Range.
    let mut g = Graph::new(15);
    g.input("x", F32, &[2, 3, 64, 64]);
    g.node(
        "Constant",
        &[],
        &["k"],
        vec![a_tensor("value", i64_tensor(&[1], &[64]))],
    );
    g.node(
        "ConstantOfShape",
        &["k"],
        &["ones"],
        vec![a_tensor("value", {
            let mut t = tensor(F32, &[1]);
            t.float_data = vec![1.0];
            t
        })],
    );
    g.node("Shape", &["x"], &["hw"], vec![a_int("start", -2)]);
    g.node("ConstantOfShape", &["hw"], &["zeros"], vec![]);
    g.node("Add", &["x", "zeros"], &["y0"], vec![]);
    g.node("Constant", &[], &["start"], vec![a_int("value_int", 0)]);
    g.node("Constant", &[], &["step"], vec![a_int("value_int", 1)]);
    g.node("Range", &["start", "k", "step"], &["r"], vec![]);
    g.node("Cast", &["r"], &["rf"], vec![a_int("to", 1)]);
    g.node("Add", &["ones", "rf"], &["z"], vec![]);
    g.node("Add", &["y0", "z"], &["y"], vec![]);
    g.output("y");
    let m = g.ok();
    assert_eq!(
        op_seq(&m),
        s(&["constant", "broadcast_to", "add", "constant", "add"])
    );
    let f = main_fn(&m);
    assert_eq!(f.name_of(f.bindings[1].results[0]), "zeros");
    assert_eq!(get(&f.bindings[3].attrs, "shape"), &Attr::ints([64]));
    let values = get(&f.bindings[3].attrs, "value").as_floats().unwrap();
    assert_eq!(values[..3], [1.0, 2.0, 3.0], "ones + range(0, 64)");
    assert_eq!(result_type(&m), "tensor<2x3x64x64xf32>");
}

#[test]
fn elementwise_activations_follow_tvm() {
    let unary = [
        ("Relu", "nn.relu"),
        ("Sigmoid", "sigmoid"),
        ("Tanh", "tanh"),
        ("Erf", "erf"),
        ("Exp", "exp"),
        ("Log", "log"),
        ("Sqrt", "sqrt"),
        ("Neg", "negative"),
        ("Abs", "abs"),
        ("Gelu", "nn.gelu"),
        ("LeakyRelu", "nn.leakyrelu"),
    ];
    for (onnx, ir) in unary {
        let mut g = Graph::new(20);
        g.input("x", F32, &[2, 3]);
        g.node(onnx, &["x"], &["y"], vec![]).output("y");
        let m = g.ok();
        assert_eq!(op_seq(&m), s(&[ir]), "{onnx}");
        assert_eq!(result_type(&m), "tensor<2x3xf32>");
    }
    let mut g = Graph::new(17);
    g.input("x", F32, &[2, 3]);
    g.node("LeakyRelu", &["x"], &["a"], vec![a_float("alpha", 0.25)]);
    g.node("HardSigmoid", &["a"], &["b"], vec![a_float("alpha", 0.5)]);
    g.node("HardSwish", &["b"], &["y"], vec![]);
    g.output("y");
    let m = g.ok();
    assert_eq!(
        get(attrs_of(&m, "nn.leakyrelu"), "alpha"),
        &Attr::Float(0.25)
    );
    assert_eq!(
        op_seq(&m),
        // Binding order follows TVM's lazy emission (see onnx/order.rs): LeakyRelu's result
        // is bound only when HardSigmoid's expression first uses it.
        s(&[
            "constant",
            "nn.leakyrelu",
            "multiply",
            "constant",
            "add",
            "clip",
            "constant",
            "add",
            "clip",
            "constant",
            "divide",
            "multiply"
        ])
    );
}

#[test]
fn binary_and_variadic_arithmetic() {
    let mut g = Graph::new(13);
    g.input("a", F32, &[2, 3])
        .input("b", F32, &[3])
        .input("c", F32, &[2, 1]);
    g.init_i64("two", &[], &[2]);
    for (op, out, ins) in [
        ("Add", "t0", ["a", "b"]),
        ("Sub", "t1", ["t0", "c"]),
        ("Mul", "t2", ["t1", "b"]),
        ("Div", "t3", ["t2", "a"]),
        ("Pow", "t4", ["t3", "two"]),
    ] {
        g.node(op, &ins, &[out], vec![]);
    }
    g.node("Max", &["t4", "a", "b"], &["t5"], vec![]);
    g.node("Min", &["t5", "c"], &["t6"], vec![]);
    g.node("Sum", &["t6", "a", "b", "c"], &["y"], vec![]);
    g.output("y");
    let m = g.ok();
    assert_eq!(
        op_seq(&m),
        s(&[
            "add", "subtract", "multiply", "divide", "constant", "power", "maximum", "maximum",
            "minimum", "add", "add", "add"
        ])
    );
    let f = main_fn(&m);
    // The int64 exponent is cast to float32 at import time.
    assert_eq!(get(&f.bindings[4].attrs, "dtype"), &Attr::str("float32"));
    assert_eq!(result_type(&m), "tensor<2x3xf32>");
}

#[test]
fn reductions_with_axes_as_attribute_or_input() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 3, 4]).init_i64("ax", &[1], &[1]);
    g.node(
        "ReduceMean",
        &["x"],
        &["a"],
        vec![a_ints("axes", &[-1]), a_int("keepdims", 0)],
    );
    g.node("ReduceSum", &["x", "ax"], &["b"], vec![]);
    g.node("ReduceMax", &["x"], &["c"], vec![]);
    g.output("a").output("b").output("c");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["mean", "sum", "max"]));
    let f = main_fn(&m);
    let types: Vec<String> = f.result_types().iter().map(|t| t.to_string()).collect();
    assert_eq!(
        types,
        ["tensor<2x3xf32>", "tensor<2x1x4xf32>", "tensor<1x1x1xf32>"]
    );

    let mut g = Graph::new(18);
    g.input("x", F32, &[2, 3, 4]).init_i64("ax", &[2], &[0, 2]);
    g.node(
        "ReduceMin",
        &["x", "ax"],
        &["a"],
        vec![a_int("keepdims", 0)],
    );
    g.node(
        "ReduceProd",
        &["a"],
        &["b"],
        vec![a_int("noop_with_empty_axes", 1)],
    );
    g.output("b");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["min"]));
    assert_eq!(result_type(&m), "tensor<3xf32>");
}

#[test]
fn pooling() {
    let mut g = Graph::new(17);
    g.input("x", F32, &[1, 4, 9, 9]);
    g.node(
        "MaxPool",
        &["x"],
        &["a"],
        vec![
            a_ints("kernel_shape", &[3, 3]),
            a_ints("strides", &[2, 2]),
            a_str("auto_pad", "SAME_UPPER"),
        ],
    );
    g.node(
        "AveragePool",
        &["a"],
        &["b"],
        vec![
            a_ints("kernel_shape", &[2, 2]),
            a_ints("pads", &[0, 0, 1, 1]),
            a_int("count_include_pad", 1),
            a_int("ceil_mode", 1),
            a_ints("strides", &[2, 2]),
        ],
    );
    g.node("GlobalAveragePool", &["b"], &["y"], vec![]);
    g.output("y");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["nn.max_pool2d", "nn.avg_pool2d", "mean"]));
    assert_eq!(
        get(attrs_of(&m, "nn.max_pool2d"), "padding"),
        &Attr::ints([1, 1, 1, 1])
    );
    let a = attrs_of(&m, "nn.avg_pool2d");
    assert_eq!(get(a, "count_include_pad"), &Attr::Bool(true));
    assert_eq!(get(a, "ceil_mode"), &Attr::Bool(true));
    let mean = attrs_of(&m, "mean");
    assert_eq!(
        (get(mean, "axis"), get(mean, "keepdims")),
        (&Attr::ints([2, 3]), &Attr::Bool(true))
    );
    assert_eq!(result_type(&m), "tensor<1x4x1x1xf32>");
}

#[test]
fn identity_and_dropout_vanish() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[3]);
    g.node("Identity", &["x"], &["a"], vec![]);
    g.node("Dropout", &["a"], &["b"], vec![]);
    g.node("Relu", &["b"], &["y"], vec![]);
    g.output("y");
    assert_eq!(op_seq(&g.ok()), s(&["nn.relu"]));
}

#[test]
fn names_are_sanitized_and_unique() {
    let mut g = Graph::new(13);
    g.input("in:0", F32, &[3]);
    g.node("Relu", &["in:0"], &["blk/relu:0"], vec![]);
    g.node("Relu", &["blk/relu:0"], &["blk/relu:1"], vec![]);
    g.node("Relu", &["blk/relu:1"], &["blk$relu"], vec![]);
    g.node("Relu", &["blk$relu"], &["blk.relu"], vec![]);
    g.output("blk.relu");
    let m = g.ok();
    let f = main_fn(&m);
    let names: Vec<&str> = f.bindings.iter().map(|b| f.name_of(b.results[0])).collect();
    assert_eq!(f.name_of(f.params[0]), "in");
    assert_eq!(names, ["blk.relu", "blk.relu_1", "blk_relu", "blk.relu_2"]);
}

#[test]
fn an_output_that_is_a_folded_constant_becomes_a_constant_binding() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 3]);
    g.node("Shape", &["x"], &["s"], vec![]).output("s");
    let m = g.ok();
    assert_eq!(op_seq(&m), s(&["constant"]));
    assert_eq!(result_type(&m), "tensor<2xi64>");
    let text = tgc_ir::text::print_module(&m);
    let back = tgc_ir::text::parse_module(&text, "t").unwrap();
    assert!(back.structurally_equal(&m));
}
