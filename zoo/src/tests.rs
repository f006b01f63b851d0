//! Every model builds, verifies and has torchvision's output shape; spot checks of the shapes
//! and counts that identify each architecture.

use super::*;
use tgc_ir::{verify_module, Module};

fn build(name: &str) -> Module {
    let m = lookup(name)
        .expect("in the zoo")
        .build()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    m
}

fn count(m: &Module, op: &str) -> usize {
    m.function("main")
        .expect("main")
        .bindings
        .iter()
        .filter(|b| b.callee.op().is_some_and(|o| o.name() == op))
        .count()
}

fn output(m: &Module) -> String {
    m.function("main").expect("main").result_types()[0].to_string()
}

#[test]
fn every_model_builds_and_verifies() {
    for model in MODELS {
        let m = build(model.name);
        assert_eq!(m.name, model.name);
        let expected = if model.name == "bert_base" {
            "tensor<1x128x768xf32>"
        } else {
            "tensor<1x1000xf32>"
        };
        assert_eq!(output(&m), expected, "{}", model.name);
    }
    assert_eq!(MODELS.len(), 13);
    assert!(lookup("resnet51").is_none());
}

#[test]
fn convolution_counts_match_torchvision() {
    // conv layers (downsample convs included), as torchvision's modules list them
    let expected = [
        ("alexnet", 5),
        ("vgg16", 13),
        ("googlenet", 57),
        ("inception_v3", 94),
        ("resnet18", 20),
        ("resnet50", 53),
        ("resnet152", 155),
        ("resnext50_32x4d", 53),
        ("wide_resnet50_2", 53),
        ("densenet121", 120),
        ("mobilenet_v2", 52),
        ("mobilenet_v3_large", 62),
    ];
    for (name, convs) in expected {
        assert_eq!(count(&build(name), "nn.conv2d"), convs, "{name}");
    }
}

#[test]
fn bert_has_twelve_layers_of_attention() {
    let m = build("bert_base");
    assert_eq!(count(&m, "nn.softmax"), 12);
    assert_eq!(count(&m, "nn.layer_norm"), 25);
    // Q, K, V, output, two feed-forward projections, and the two attention products
    assert_eq!(count(&m, "matmul"), 12 * 8);
    assert_eq!(count(&m, "erf"), 12);
}

#[test]
fn parameters_are_weights_in_order_of_use() {
    let m = build("resnet18");
    let f = m.function("main").expect("main");
    let names: Vec<&str> = f.params.iter().take(4).map(|p| f.name_of(*p)).collect();
    assert_eq!(
        names,
        ["input", "conv1.weight", "bn1.bias", "layer1.0.conv1.weight"]
    );
    assert_eq!(f.ty(f.params[2]).to_string(), "tensor<1x64x1x1xf32>");
}
