//! AlexNet and VGG-16 (torchvision `alexnet`, `vgg16`): plain conv/ReLU/max-pool stacks with
//! biased convolutions and a three-layer classifier. At 224x224 their `AdaptiveAvgPool2d`
//! already sees its output size (6x6, 7x7) and is exported as a 1x1 AveragePool.

use crate::net::{sq, Net, R};
use tgc_ir::Module;

pub(crate) fn alexnet() -> R<Module> {
    let (mut n, x) = Net::image(224);
    // features: (index in torchvision's Sequential, out channels, kernel, stride, padding)
    let convs: [(usize, i64, i64, i64, i64); 5] = [
        (0, 64, 11, 4, 2),
        (3, 192, 5, 1, 2),
        (6, 384, 3, 1, 1),
        (8, 256, 3, 1, 1),
        (10, 256, 3, 1, 1),
    ];
    let mut y = x;
    for (index, cout, k, s, p) in convs {
        y = n.conv_biased(y, &format!("features.{index}"), cout, sq(k, s, p))?;
        y = n.relu(y)?;
        if matches!(index, 0 | 3 | 10) {
            y = n.max_pool(y, sq(3, 2, 0), false)?;
        }
    }
    y = n.adaptive_avg_pool(y, 6)?;
    y = n.flatten(y)?;
    y = n.linear(y, "classifier.1", 4096)?;
    y = n.relu(y)?;
    y = n.linear(y, "classifier.4", 4096)?;
    y = n.relu(y)?;
    y = n.linear(y, "classifier.6", 1000)?;
    Ok(n.finish("alexnet", &[y]))
}

pub(crate) fn vgg16() -> R<Module> {
    // Configuration "D": channel counts, 0 for a 2x2 max pool.
    const CFG: [i64; 18] = [
        64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
    ];
    let (mut n, x) = Net::image(224);
    let mut y = x;
    let mut index = 0;
    for c in CFG {
        if c == 0 {
            y = n.max_pool(y, sq(2, 2, 0), false)?;
            index += 1;
        } else {
            y = n.conv_biased(y, &format!("features.{index}"), c, sq(3, 1, 1))?;
            y = n.relu(y)?;
            index += 2;
        }
    }
    y = n.adaptive_avg_pool(y, 7)?;
    y = n.flatten(y)?;
    y = n.linear(y, "classifier.0", 4096)?;
    y = n.relu(y)?;
    y = n.linear(y, "classifier.3", 4096)?;
    y = n.relu(y)?;
    y = n.linear(y, "classifier.6", 1000)?;
    Ok(n.finish("vgg16", &[y]))
}
