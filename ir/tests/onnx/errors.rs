//! Bad input is an `ImportError` with a one-line message naming the file and the place, never
//! a panic.

use crate::builder::*;
use std::path::{Path, PathBuf};
use tgc_ir::onnx::{import_bytes, import_file};

fn model_bytes(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models")
        .join(name);
    std::fs::read(p).expect("model file")
}

fn message(bytes: &[u8]) -> String {
    match import_bytes(bytes, "model.onnx", &[]) {
        Ok(_) => panic!("expected an error"),
        Err(e) => {
            let s = e.to_string();
            assert!(!s.contains('\n'), "one line: {s:?}");
            s
        }
    }
}

#[test]
fn truncated_file() {
    let bytes = model_bytes("keras-resnet50.onnx");
    for cut in [bytes.len() / 2, bytes.len() - 1, 10] {
        assert_eq!(
            message(&bytes[..cut]),
            "model.onnx: not a valid ONNX model (truncated protobuf)"
        );
    }
}

#[test]
fn random_bytes_and_empty_files() {
    assert_eq!(
        message(b""),
        "model.onnx: not a valid ONNX model (no graph)"
    );
    // A simple xorshift so the test is deterministic without a dependency.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for len in [1usize, 7, 64, 1000, 10_000] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let m = message(&bytes);
        assert!(m.starts_with("model.onnx: not a valid ONNX model ("), "{m}");
    }
}

#[test]
fn missing_file() {
    let e = import_file(Path::new("/nonexistent/m.onnx"), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/nonexistent/m.onnx: cannot read the file: "),
        "{e}"
    );
}

#[test]
fn unknown_op_names_the_node() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[1, 3, 4, 4])
        .input("w", F32, &[2, 3, 1, 1]);
    g.node("ConvInteger", &["x", "w"], &["y"], vec![])
        .output("y");
    g.last_node().name = "conv1".into();
    assert_eq!(
        g.err(),
        "test.onnx: node 'conv1' (ConvInteger): unsupported op"
    );

    let mut g = Graph::new(13);
    g.input("x", F32, &[3]);
    g.node("FusedGemm", &["x"], &["y"], vec![]).output("y");
    g.last_node().domain = "com.microsoft".into();
    g.last_node().name.clear();
    assert_eq!(
        g.err(),
        "test.onnx: node #0 (FusedGemm): unsupported op (domain 'com.microsoft')"
    );
}

#[test]
fn dynamic_dimension_without_a_shape() {
    let mut g = Graph::new(13);
    g.input_dims(
        "input",
        F32,
        &[
            Dim::Named("N"),
            Dim::Fixed(3),
            Dim::Fixed(224),
            Dim::Fixed(224),
        ],
    );
    g.node("Relu", &["input"], &["y"], vec![]).output("y");
    assert_eq!(
        g.err(),
        "test.onnx: input 'input' has a dynamic dimension 'N'; give it with --shape input=1x3x224x224"
    );
    let m = g.import_with(&[("input", &[8, 3, 224, 224])]).unwrap();
    assert_eq!(result_type(&m), "tensor<8x3x224x224xf32>");

    let mut g = Graph::new(13);
    g.input_unshaped("x", F32);
    g.node("Relu", &["x"], &["y"], vec![]).output("y");
    assert_eq!(
        g.err(),
        "test.onnx: input 'x' has no shape; give it with --shape x=..."
    );
}

#[test]
fn bad_shapes_given_by_the_caller() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 3]);
    g.node("Relu", &["x"], &["y"], vec![]).output("y");
    let e = g.import_with(&[("y", &[2, 3])]).unwrap_err().to_string();
    assert_eq!(
        e,
        "test.onnx: --shape names 'y', which is not an input of the model (inputs: x)"
    );
    let e = g.import_with(&[("x", &[2, 3, 4])]).unwrap_err().to_string();
    assert_eq!(
        e,
        "test.onnx: input 'x': has rank 2 but --shape gives 3 dimensions"
    );
    let e = g.import_with(&[("x", &[2, 0])]).unwrap_err().to_string();
    assert_eq!(e, "test.onnx: input 'x': --shape gives dimension 0");
}

#[test]
fn wrong_attributes_name_the_attribute() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[1, 3, 4, 4])
        .input("w", F32, &[2, 3, 1, 1]);
    g.node(
        "Conv",
        &["x", "w"],
        &["y"],
        vec![a_floats("strides", &[1.0, 1.0])],
    )
    .output("y");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Conv): attribute 'strides' must be a list of ints, the model gives a list of floats"
    );

    let mut g = Graph::new(13);
    g.input("x", F32, &[1, 3, 4, 4])
        .input("w", F32, &[2, 3, 1, 1]);
    g.node(
        "Conv",
        &["x", "w"],
        &["y"],
        vec![a_ints("strides", &[0, 1])],
    )
    .output("y");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Conv): strides value 0 is out of range (1 to 16777216)"
    );

    let mut g = Graph::new(13);
    g.input("x", F32, &[4]);
    g.node("Pad", &["x"], &["y"], vec![a_str("mode", "mirror")])
        .output("y");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Pad): mode = 'mirror' is not supported"
    );
}

#[test]
fn inconsistent_shapes() {
    let mut g = Graph::new(13);
    g.input("a", F32, &[2, 3]).input("b", F32, &[4]);
    g.node("Add", &["a", "b"], &["y"], vec![]).output("y");
    let e = g.err();
    assert!(e.starts_with("test.onnx: node 'n0' (Add): "), "{e}");

    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 3]).init_i64("shape", &[1], &[5]);
    g.node("Reshape", &["x", "shape"], &["y"], vec![])
        .output("y");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Reshape): cannot reshape [2, 3] (6 elements) to [5] (5 elements)"
    );
}

#[test]
fn run_time_values_where_constants_are_needed() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[2, 3]).input("shape", I64, &[2]);
    g.node("Reshape", &["x", "shape"], &["y"], vec![])
        .output("y");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Reshape): the shape must be a constant; it is computed at run time"
    );
}

#[test]
fn graph_structure_errors() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[2]);
    g.node("Relu", &["nope"], &["y"], vec![]).output("y");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Relu): input 'nope' is not defined before this node"
    );

    let mut g = Graph::new(13);
    g.input("x", F32, &[2]);
    g.node("Relu", &["x"], &["y"], vec![]).output("z");
    assert_eq!(
        g.err(),
        "test.onnx: output 'z': is not produced by any node, input or initializer"
    );

    let mut g = Graph::new(13);
    g.input("x", F32, &[2]);
    g.node("Relu", &["x"], &["x"], vec![]).output("x");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Relu): output 'x' is already defined"
    );

    let mut g = Graph::new(5);
    g.input("x", F32, &[2]);
    g.node("Relu", &["x"], &["y"], vec![]).output("y");
    assert_eq!(g.err(), "test.onnx: opset 5 is not supported (7 to 22)");
}

#[test]
fn names_in_messages_stay_on_one_line() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[2]);
    g.node("Bad\nOp", &["x"], &["y"], vec![]).output("y");
    g.last_node().name = "line1\nline2".into();
    assert_eq!(
        g.err(),
        "test.onnx: node 'line1\\nline2' (Bad\\nOp): unsupported op"
    );
}

#[test]
fn malformed_initializers() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[2]);
    let mut t = tensor(I64, &[2]);
    t.name = "shape".into();
    t.int64_data = vec![2];
    let mut m = g.model();
    m.graph.as_mut().unwrap().initializer.push(t);
    let mut n = onnx_protobuf::NodeProto::new();
    n.op_type = "Reshape".into();
    n.input = vec!["x".into(), "shape".into()];
    n.output = vec!["y".into()];
    m.graph.as_mut().unwrap().node.push(n);
    let mut out = onnx_protobuf::ValueInfoProto::new();
    out.name = "y".into();
    m.graph.as_mut().unwrap().output.push(out);
    use onnx_protobuf::Message;
    let e = import_bytes(&m.write_to_bytes().unwrap(), "m.onnx", &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "m.onnx: node #0 (Reshape): constant 'shape': tensor data has 1 elements, its shape says 2"
    );
}
