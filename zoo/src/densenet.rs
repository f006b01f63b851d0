//! DenseNet-121 (torchvision `densenet.py`: growth rate 32, blocks (6, 12, 24, 16), 64 initial
//! features, bottleneck width 4 * 32). Every dense layer concatenates all earlier feature maps
//! of its block (`torch.cat(inputs, 1)`, a one-input Concat for the first layer) and applies
//! BN-ReLU-conv1x1-BN-ReLU-conv3x3; the BN before each 1x1 follows a concat, so it stays a
//! per-channel scale and shift, while the BN after the 1x1 folds into it. Transitions are
//! BN-ReLU-conv1x1-avgpool(2, 2); the head is BN, ReLU, global mean, linear.

use crate::net::{sq, Net, R};
use tgc_ir::{Module, ValueId};

const GROWTH: i64 = 32;
const BN_SIZE: i64 = 4;

fn dense_layer(n: &mut Net, features: &[ValueId], name: &str) -> R<ValueId> {
    let x = n.concat(features, 1)?;
    let y = n.bn_affine(x, &format!("{name}.norm1"))?;
    let y = n.relu(y)?;
    let y = n.conv_bn(
        y,
        &format!("{name}.conv1"),
        &format!("{name}.norm2"),
        BN_SIZE * GROWTH,
        sq(1, 1, 0),
        1,
    )?;
    let y = n.relu(y)?;
    n.conv(y, &format!("{name}.conv2"), GROWTH, sq(3, 1, 1), 1)
}

pub(crate) fn densenet121() -> R<Module> {
    let (mut n, x) = Net::image(224);
    let mut y = n.conv_bn(x, "features.conv0", "features.norm0", 64, sq(7, 2, 3), 1)?;
    y = n.relu(y)?;
    y = n.max_pool(y, sq(3, 2, 1), false)?;
    let blocks = [6, 12, 24, 16];
    for (b, &layers) in blocks.iter().enumerate() {
        let mut features = vec![y];
        for l in 0..layers {
            let name = format!("features.denseblock{}.denselayer{}", b + 1, l + 1);
            let new = dense_layer(&mut n, &features, &name)?;
            features.push(new);
        }
        y = n.concat(&features, 1)?;
        if b + 1 < blocks.len() {
            let name = format!("features.transition{}", b + 1);
            let half = n.channels(y) / 2;
            y = n.bn_affine(y, &format!("{name}.norm"))?;
            y = n.relu(y)?;
            y = n.conv(y, &format!("{name}.conv"), half, sq(1, 1, 0), 1)?;
            y = n.avg_pool(y, sq(2, 2, 0), true)?;
        }
    }
    y = n.bn_affine(y, "features.norm5")?;
    y = n.relu(y)?;
    y = n.adaptive_avg_pool(y, 1)?;
    y = n.flatten(y)?;
    y = n.linear(y, "classifier", 1000)?;
    Ok(n.finish("densenet121", &[y]))
}
