//! tgc-zoo: the twelve CNN architectures the TGC paper evaluated, plus a BERT-base encoder,
//! built with the tgc IR builder.
//!
//! Each model has torchvision's structure and shapes (the encoder: Hugging Face's) at batch 1,
//! 224x224 (Inception-v3: 299x299; BERT: sequence 128), in the inference form an ONNX exporter
//! produces: eval-mode branches only, batch norms folded into the convolution before them,
//! biases as `add` of a `[1, C, 1, 1]` parameter. Weights are parameters of `@main`, without
//! data. The conventions every model shares are in the `net` module's docs.
//!
//! ```
//! let model = tgc_zoo::lookup("resnet50").expect("a zoo model");
//! let module = model.build().expect("the architecture builds");
//! tgc_ir::verify_module(&module).expect("and verifies");
//! assert_eq!(module.function("main").unwrap().result_types()[0].to_string(), "tensor<1x1000xf32>");
//! ```

mod bert;
mod classic;
mod densenet;
mod inception;
mod mobilenet;
mod net;
mod resnet;

use resnet::Block;
use tgc_ir::{IrError, Module};

/// One architecture of the zoo.
pub struct ZooModel {
    /// The torchvision builder's name (`resnet50`), or `bert_base`.
    pub name: &'static str,
    /// One line: what it is and its input.
    pub summary: &'static str,
    build: fn() -> Result<Module, IrError>,
}

impl ZooModel {
    /// Builds the model: a module named after it with one function `@main`.
    pub fn build(&self) -> Result<Module, IrError> {
        (self.build)()
    }
}

const BOTTLENECK: Block = Block::Bottleneck {
    groups: 1,
    base_width: 64,
};

/// Every model, in the order of the TGC paper's table (the encoder last).
pub static MODELS: &[ZooModel] = &[
    ZooModel {
        name: "alexnet",
        summary: "AlexNet, 1x3x224x224",
        build: classic::alexnet,
    },
    ZooModel {
        name: "vgg16",
        summary: "VGG-16 (configuration D), 1x3x224x224",
        build: classic::vgg16,
    },
    ZooModel {
        name: "googlenet",
        summary: "GoogLeNet (Inception v1, eval: no auxiliary heads), 1x3x224x224",
        build: inception::googlenet,
    },
    ZooModel {
        name: "inception_v3",
        summary: "Inception-v3 (eval: no auxiliary head), 1x3x299x299",
        build: inception::inception_v3,
    },
    ZooModel {
        name: "resnet18",
        summary: "ResNet-18, basic blocks [2, 2, 2, 2], 1x3x224x224",
        build: || resnet::resnet("resnet18", Block::Basic, [2, 2, 2, 2]),
    },
    ZooModel {
        name: "resnet50",
        summary: "ResNet-50 (v1.5), bottlenecks [3, 4, 6, 3], 1x3x224x224",
        build: || resnet::resnet("resnet50", BOTTLENECK, [3, 4, 6, 3]),
    },
    ZooModel {
        name: "resnet152",
        summary: "ResNet-152 (v1.5), bottlenecks [3, 8, 36, 3], 1x3x224x224",
        build: || resnet::resnet("resnet152", BOTTLENECK, [3, 8, 36, 3]),
    },
    ZooModel {
        name: "resnext50_32x4d",
        summary: "ResNeXt-50 32x4d (grouped 3x3, 32 groups), 1x3x224x224",
        build: || {
            let block = Block::Bottleneck {
                groups: 32,
                base_width: 4,
            };
            resnet::resnet("resnext50_32x4d", block, [3, 4, 6, 3])
        },
    },
    ZooModel {
        name: "wide_resnet50_2",
        summary: "Wide-ResNet-50-2 (bottleneck width x2), 1x3x224x224",
        build: || {
            let block = Block::Bottleneck {
                groups: 1,
                base_width: 128,
            };
            resnet::resnet("wide_resnet50_2", block, [3, 4, 6, 3])
        },
    },
    ZooModel {
        name: "densenet121",
        summary: "DenseNet-121 (growth 32, blocks [6, 12, 24, 16]), 1x3x224x224",
        build: densenet::densenet121,
    },
    ZooModel {
        name: "mobilenet_v2",
        summary: "MobileNetV2 (width 1.0, ReLU6), 1x3x224x224",
        build: mobilenet::mobilenet_v2,
    },
    ZooModel {
        name: "mobilenet_v3_large",
        summary: "MobileNetV3-Large (Hardswish, squeeze-excitation), 1x3x224x224",
        build: mobilenet::mobilenet_v3_large,
    },
    ZooModel {
        name: "bert_base",
        summary: "BERT-base encoder (12 layers, hidden 768), input_ids + token_type_ids 1x128",
        build: bert::bert_base,
    },
];

/// The model called `name`, if the zoo has one.
pub fn lookup(name: &str) -> Option<&'static ZooModel> {
    MODELS.iter().find(|m| m.name == name)
}

/// The names of every model, in [`MODELS`] order.
pub fn names() -> impl Iterator<Item = &'static str> {
    MODELS.iter().map(|m| m.name)
}

#[cfg(test)]
mod tests;
