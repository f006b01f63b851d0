//! The ResNet family (torchvision `resnet.py`, v1.5: the stride sits on the 3x3 conv):
//! ResNet-18 (basic blocks), ResNet-50/152, ResNeXt-50 32x4d and Wide-ResNet-50-2
//! (bottlenecks with `width = planes * base_width / 64 * groups`). Every BN follows a conv and
//! is folded. Bindings follow `forward`: the main path, then the downsample, then
//! `out += identity` (`add(out, identity)`) and ReLU.

use crate::net::{sq, Net, R};
use tgc_ir::{Module, ValueId};

/// Which residual block a ResNet stacks.
#[derive(Clone, Copy)]
pub(crate) enum Block {
    Basic,
    /// A bottleneck with `groups` and `base_width` (64 for ResNet-50).
    Bottleneck {
        groups: i64,
        base_width: i64,
    },
}

impl Block {
    fn expansion(self) -> i64 {
        match self {
            Block::Basic => 1,
            Block::Bottleneck { .. } => 4,
        }
    }
}

fn block(n: &mut Net, x: ValueId, name: &str, kind: Block, planes: i64, stride: i64) -> R<ValueId> {
    let out_channels = planes * kind.expansion();
    let needs_downsample = stride != 1 || n.channels(x) != out_channels;
    let mut out = x;
    match kind {
        Block::Basic => {
            out = n.conv_bn(
                out,
                &format!("{name}.conv1"),
                &format!("{name}.bn1"),
                planes,
                sq(3, stride, 1),
                1,
            )?;
            out = n.relu(out)?;
            out = n.conv_bn(
                out,
                &format!("{name}.conv2"),
                &format!("{name}.bn2"),
                planes,
                sq(3, 1, 1),
                1,
            )?;
        }
        Block::Bottleneck { groups, base_width } => {
            let width = planes * base_width / 64 * groups;
            out = n.conv_bn(
                out,
                &format!("{name}.conv1"),
                &format!("{name}.bn1"),
                width,
                sq(1, 1, 0),
                1,
            )?;
            out = n.relu(out)?;
            out = n.conv_bn(
                out,
                &format!("{name}.conv2"),
                &format!("{name}.bn2"),
                width,
                sq(3, stride, 1),
                groups,
            )?;
            out = n.relu(out)?;
            out = n.conv_bn(
                out,
                &format!("{name}.conv3"),
                &format!("{name}.bn3"),
                out_channels,
                sq(1, 1, 0),
                1,
            )?;
        }
    }
    let identity = if needs_downsample {
        n.conv_bn(
            x,
            &format!("{name}.downsample.0"),
            &format!("{name}.downsample.1"),
            out_channels,
            sq(1, stride, 0),
            1,
        )?
    } else {
        x
    };
    out = n.add(out, identity)?;
    n.relu(out)
}

pub(crate) fn resnet(name: &str, kind: Block, layers: [usize; 4]) -> R<Module> {
    let (mut n, x) = Net::image(224);
    let mut y = n.conv_bn(x, "conv1", "bn1", 64, sq(7, 2, 3), 1)?;
    y = n.relu(y)?;
    y = n.max_pool(y, sq(3, 2, 1), false)?;
    for (i, (&count, planes)) in layers.iter().zip([64, 128, 256, 512]).enumerate() {
        for b in 0..count {
            let stride = if i > 0 && b == 0 { 2 } else { 1 };
            y = block(
                &mut n,
                y,
                &format!("layer{}.{b}", i + 1),
                kind,
                planes,
                stride,
            )?;
        }
    }
    y = n.adaptive_avg_pool(y, 1)?;
    y = n.flatten(y)?;
    y = n.linear(y, "fc", 1000)?;
    Ok(n.finish(name, &[y]))
}
