//! MobileNetV2 and MobileNetV3-Large (torchvision `mobilenetv2.py`, `mobilenetv3.py`):
//! inverted residuals of expand 1x1, depthwise kxk, (V3: squeeze-excitation,) project 1x1,
//! every BN folded into its conv. V2 uses ReLU6 (`clip(0, 6)`) and adds the residual as
//! `x + block(x)`; V3 mixes ReLU and Hardswish, scales by a Hardsigmoid SE
//! (`scale * input`), and adds as `result += input`.

use crate::net::{sq, Net, Window, R};
use tgc_ir::{Module, ValueId};

/// A `k` x `k` window with `stride` and PyTorch's `(k - 1) / 2` padding.
fn same(k: i64, stride: i64) -> Window {
    sq(k, stride, (k - 1) / 2)
}

/// Conv, folded BN and an activation (`Conv2dNormActivation`), named `{name}.0` / `{name}.1`.
fn conv_bn_act(
    n: &mut Net,
    x: ValueId,
    name: &str,
    cout: i64,
    w: Window,
    groups: i64,
    act: Act,
) -> R<ValueId> {
    let y = n.conv_bn(
        x,
        &format!("{name}.0"),
        &format!("{name}.1"),
        cout,
        w,
        groups,
    )?;
    match act {
        Act::Relu => n.relu(y),
        Act::Relu6 => n.relu6(y),
        Act::Hardswish => n.hardswish(y),
        Act::None => Ok(y),
    }
}

#[derive(Clone, Copy)]
enum Act {
    Relu,
    Relu6,
    Hardswish,
    None,
}

pub(crate) fn mobilenet_v2() -> R<Module> {
    // (expand ratio t, out channels c, repeats n, first stride s)
    const SETTINGS: [(i64, i64, usize, i64); 7] = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ];
    let (mut n, x) = Net::image(224);
    let mut y = conv_bn_act(&mut n, x, "features.0", 32, same(3, 2), 1, Act::Relu6)?;
    let mut index = 1;
    for (t, c, repeats, s) in SETTINGS {
        for i in 0..repeats {
            let stride = if i == 0 { s } else { 1 };
            let name = format!("features.{index}.conv");
            let input = y;
            let cin = n.channels(input);
            let hidden = cin * t;
            let mut layer = 0;
            let mut h = input;
            if t != 1 {
                h = conv_bn_act(
                    &mut n,
                    h,
                    &format!("{name}.{layer}"),
                    hidden,
                    same(1, 1),
                    1,
                    Act::Relu6,
                )?;
                layer += 1;
            }
            h = conv_bn_act(
                &mut n,
                h,
                &format!("{name}.{layer}"),
                hidden,
                same(3, stride),
                hidden,
                Act::Relu6,
            )?;
            layer += 1;
            h = n.conv_bn(
                h,
                &format!("{name}.{layer}"),
                &format!("{name}.{}", layer + 1),
                c,
                sq(1, 1, 0),
                1,
            )?;
            y = if stride == 1 && cin == c {
                n.add(input, h)?
            } else {
                h
            };
            index += 1;
        }
    }
    y = conv_bn_act(
        &mut n,
        y,
        &format!("features.{index}"),
        1280,
        same(1, 1),
        1,
        Act::Relu6,
    )?;
    y = n.adaptive_avg_pool(y, 1)?;
    y = n.flatten(y)?;
    y = n.linear(y, "classifier.1", 1000)?;
    Ok(n.finish("mobilenet_v2", &[y]))
}

/// `_make_divisible(v, 8)`: round to the nearest multiple of 8, never more than 10% down.
fn make_divisible(v: i64) -> i64 {
    let d = 8;
    let rounded = ((v + d / 2) / d * d).max(d);
    if (rounded as f64) < 0.9 * v as f64 {
        rounded + d
    } else {
        rounded
    }
}

/// `SqueezeExcitation`: global mean, 1x1 conv + ReLU, 1x1 conv + Hardsigmoid, `scale * input`.
fn squeeze_excitation(n: &mut Net, x: ValueId, name: &str) -> R<ValueId> {
    let c = n.channels(x);
    let squeeze = make_divisible(c / 4);
    let s = n.adaptive_avg_pool(x, 1)?;
    let s = n.conv_biased(s, &format!("{name}.fc1"), squeeze, sq(1, 1, 0))?;
    let s = n.relu(s)?;
    let s = n.conv_biased(s, &format!("{name}.fc2"), c, sq(1, 1, 0))?;
    let s = n.hardsigmoid(s)?;
    n.mul(s, x)
}

pub(crate) fn mobilenet_v3_large() -> R<Module> {
    // (in, kernel, expanded, out, squeeze-excitation, hardswish, stride)
    const SETTINGS: [(i64, i64, i64, i64, bool, bool, i64); 15] = [
        (16, 3, 16, 16, false, false, 1),
        (16, 3, 64, 24, false, false, 2),
        (24, 3, 72, 24, false, false, 1),
        (24, 5, 72, 40, true, false, 2),
        (40, 5, 120, 40, true, false, 1),
        (40, 5, 120, 40, true, false, 1),
        (40, 3, 240, 80, false, true, 2),
        (80, 3, 200, 80, false, true, 1),
        (80, 3, 184, 80, false, true, 1),
        (80, 3, 184, 80, false, true, 1),
        (80, 3, 480, 112, true, true, 1),
        (112, 3, 672, 112, true, true, 1),
        (112, 5, 672, 160, true, true, 2),
        (160, 5, 960, 160, true, true, 1),
        (160, 5, 960, 160, true, true, 1),
    ];
    let (mut n, x) = Net::image(224);
    let mut y = conv_bn_act(&mut n, x, "features.0", 16, same(3, 2), 1, Act::Hardswish)?;
    for (i, (cin, k, exp, cout, se, hs, stride)) in SETTINGS.into_iter().enumerate() {
        let name = format!("features.{}.block", i + 1);
        let act = if hs { Act::Hardswish } else { Act::Relu };
        let input = y;
        let mut h = input;
        let mut layer = 0;
        if exp != cin {
            h = conv_bn_act(
                &mut n,
                h,
                &format!("{name}.{layer}"),
                exp,
                same(1, 1),
                1,
                act,
            )?;
            layer += 1;
        }
        h = conv_bn_act(
            &mut n,
            h,
            &format!("{name}.{layer}"),
            exp,
            same(k, stride),
            exp,
            act,
        )?;
        layer += 1;
        if se {
            h = squeeze_excitation(&mut n, h, &format!("{name}.{layer}"))?;
            layer += 1;
        }
        h = conv_bn_act(
            &mut n,
            h,
            &format!("{name}.{layer}"),
            cout,
            same(1, 1),
            1,
            Act::None,
        )?;
        y = if stride == 1 && cin == cout {
            n.add(h, input)?
        } else {
            h
        };
    }
    y = conv_bn_act(&mut n, y, "features.16", 960, same(1, 1), 1, Act::Hardswish)?;
    y = n.adaptive_avg_pool(y, 1)?;
    y = n.flatten(y)?;
    y = n.linear(y, "classifier.0", 1280)?;
    y = n.hardswish(y)?;
    y = n.linear(y, "classifier.3", 1000)?;
    Ok(n.finish("mobilenet_v3_large", &[y]))
}
