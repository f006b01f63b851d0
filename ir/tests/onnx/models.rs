//! The four shared Keras models (models/README.md) import with static shapes, print, parse
//! back, and have the expected bindings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use tgc_ir::onnx::{import_file, op_histogram};
use tgc_ir::text::{parse_module, print_module};
use tgc_ir::Module;

fn model(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models")
        .join(name)
}

/// Imports and verifies.
fn import(name: &str) -> Module {
    let m = match import_file(&model(name), &[]) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    if let Err(e) = tgc_ir::verify_module(&m) {
        panic!("{name} does not verify: {e}");
    }
    m
}

fn hist(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Imports, checks the printed text parses back to the same module, and returns the module.
fn roundtrip(name: &str) -> Module {
    let m = import(name);
    let text = print_module(&m);
    let back = parse_module(&text, name).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        back.structurally_equal(&m),
        "{name}: printed module does not parse back equal"
    );
    m
}

fn main_fn(m: &Module) -> &tgc_ir::Function {
    m.function("main").expect("@main")
}

#[test]
fn resnet50() {
    let m = roundtrip("keras-resnet50.onnx");
    let f = main_fn(&m);
    assert_eq!(f.result_types()[0].to_string(), "tensor<1x1000xf32>");
    assert_eq!(
        op_histogram(&m),
        hist(&[
            ("add", 16),
            ("matmul", 1),
            ("mean", 1),
            ("nn.conv2d", 53),
            ("nn.max_pool2d", 1),
            ("nn.pad", 1),
            ("nn.relu", 49),
            ("nn.softmax", 1),
            ("permute_dims", 1),
            ("squeeze", 1),
        ])
    );
}

#[test]
fn mobilenetv2() {
    let m = roundtrip("keras-mobilenetv2.onnx");
    let f = main_fn(&m);
    assert_eq!(f.result_types()[0].to_string(), "tensor<1x1000xf32>");
    assert_eq!(
        op_histogram(&m),
        hist(&[
            ("add", 10),
            ("clip", 35),
            ("matmul", 1),
            ("mean", 1),
            ("multiply", 17),
            ("nn.conv2d", 52),
            ("nn.pad", 4),
            ("nn.softmax", 1),
            ("permute_dims", 1),
            ("squeeze", 1),
        ])
    );
}

#[test]
fn densenet121() {
    let m = roundtrip("keras-densenet121.onnx");
    let f = main_fn(&m);
    assert_eq!(f.result_types()[0].to_string(), "tensor<1x1000xf32>");
    let h = op_histogram(&m);
    assert_eq!(h.get("nn.conv2d"), Some(&120));
    assert_eq!(h.get("concat"), Some(&58));
    assert_eq!(h.get("nn.avg_pool2d"), Some(&3));
}

#[test]
fn inceptionv3() {
    let m = roundtrip("keras-inceptionv3.onnx");
    let f = main_fn(&m);
    assert_eq!(f.result_types()[0].to_string(), "tensor<1x1000xf32>");
    let h = op_histogram(&m);
    assert_eq!(h.get("nn.conv2d"), Some(&94));
    assert_eq!(h.get("concat"), Some(&11));
    assert_eq!(h.get("nn.avg_pool2d"), Some(&9));
    assert_eq!(h.get("nn.max_pool2d"), Some(&4));
}

#[test]
fn weights_are_parameters_and_the_input_comes_first() {
    let m = import("keras-resnet50.onnx");
    let f = main_fn(&m);
    assert_eq!(f.name_of(f.params[0]), "input");
    assert_eq!(f.ty(f.params[0]).to_string(), "tensor<1x224x224x3xf32>");
    // The exporter turned the weights into graph inputs, so all 55 are inputs.
    assert_eq!(f.attrs.get("num_input"), Some(&tgc_ir::Attr::Int(55)));
    // 54 weights given as graph inputs; the pads and squeeze axes fold into attributes.
    assert_eq!(f.params.len(), 55);
    let text = print_module(&m);
    assert!(
        text.contains("%resnet50_1.conv1_relu_1.Relu"),
        "names keep the ONNX scopes"
    );
}

#[test]
fn batch_can_be_given_with_a_shape() {
    let shapes = [("input".to_string(), vec![4, 224, 224, 3])];
    let m = import_file(&model("keras-resnet50.onnx"), &shapes).unwrap();
    assert_eq!(
        main_fn(&m).result_types()[0].to_string(),
        "tensor<4x1000xf32>"
    );
}
