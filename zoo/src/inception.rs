//! GoogLeNet and Inception-v3 (torchvision `googlenet.py`, `inception.py`) in eval mode: no
//! auxiliary classifiers (they only run in training), no input transform (the default without
//! pretrained weights). `BasicConv2d` is conv (no bias) + BN (folded) + ReLU.

use crate::net::{rect, sq, Net, Window, R};
use tgc_ir::{Module, ValueId};

/// `BasicConv2d`: conv, folded BN, ReLU; torchvision names `{name}.conv`, `{name}.bn`.
fn basic(n: &mut Net, x: ValueId, name: &str, cout: i64, w: Window) -> R<ValueId> {
    let y = n.conv_bn(
        x,
        &format!("{name}.conv"),
        &format!("{name}.bn"),
        cout,
        w,
        1,
    )?;
    n.relu(y)
}

// ---- GoogLeNet ------------------------------------------------------------------------------

/// `Inception(in, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj)`; the "5x5" branch uses
/// a 3x3 kernel, as torchvision does (pytorch/vision#906).
fn googlenet_block(n: &mut Net, x: ValueId, name: &str, ch: [i64; 6]) -> R<ValueId> {
    let [c1, c3r, c3, c5r, c5, pool] = ch;
    let b1 = basic(n, x, &format!("{name}.branch1"), c1, sq(1, 1, 0))?;
    let b2 = basic(n, x, &format!("{name}.branch2.0"), c3r, sq(1, 1, 0))?;
    let b2 = basic(n, b2, &format!("{name}.branch2.1"), c3, sq(3, 1, 1))?;
    let b3 = basic(n, x, &format!("{name}.branch3.0"), c5r, sq(1, 1, 0))?;
    let b3 = basic(n, b3, &format!("{name}.branch3.1"), c5, sq(3, 1, 1))?;
    let b4 = n.max_pool(x, sq(3, 1, 1), true)?;
    let b4 = basic(n, b4, &format!("{name}.branch4.1"), pool, sq(1, 1, 0))?;
    n.concat(&[b1, b2, b3, b4], 1)
}

pub(crate) fn googlenet() -> R<Module> {
    let (mut n, x) = Net::image(224);
    let mut y = basic(&mut n, x, "conv1", 64, sq(7, 2, 3))?;
    y = n.max_pool(y, sq(3, 2, 0), true)?;
    y = basic(&mut n, y, "conv2", 64, sq(1, 1, 0))?;
    y = basic(&mut n, y, "conv3", 192, sq(3, 1, 1))?;
    y = n.max_pool(y, sq(3, 2, 0), true)?;
    let stages: [(&str, [i64; 6]); 9] = [
        ("inception3a", [64, 96, 128, 16, 32, 32]),
        ("inception3b", [128, 128, 192, 32, 96, 64]),
        ("inception4a", [192, 96, 208, 16, 48, 64]),
        ("inception4b", [160, 112, 224, 24, 64, 64]),
        ("inception4c", [128, 128, 256, 24, 64, 64]),
        ("inception4d", [112, 144, 288, 32, 64, 64]),
        ("inception4e", [256, 160, 320, 32, 128, 128]),
        ("inception5a", [256, 160, 320, 32, 128, 128]),
        ("inception5b", [384, 192, 384, 48, 128, 128]),
    ];
    for (name, ch) in stages {
        y = googlenet_block(&mut n, y, name, ch)?;
        match name {
            "inception3b" => y = n.max_pool(y, sq(3, 2, 0), true)?,
            "inception4e" => y = n.max_pool(y, sq(2, 2, 0), true)?,
            _ => {}
        }
    }
    y = n.adaptive_avg_pool(y, 1)?;
    y = n.flatten(y)?;
    y = n.linear(y, "fc", 1000)?;
    Ok(n.finish("googlenet", &[y]))
}

// ---- Inception-v3 ---------------------------------------------------------------------------

/// `F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)` (count_include_pad defaults to true).
fn pool_branch(n: &mut Net, x: ValueId) -> R<ValueId> {
    n.avg_pool(x, sq(3, 1, 1), true)
}

fn inception_a(n: &mut Net, x: ValueId, name: &str, pool_features: i64) -> R<ValueId> {
    let b1 = basic(n, x, &format!("{name}.branch1x1"), 64, sq(1, 1, 0))?;
    let b5 = basic(n, x, &format!("{name}.branch5x5_1"), 48, sq(1, 1, 0))?;
    let b5 = basic(n, b5, &format!("{name}.branch5x5_2"), 64, sq(5, 1, 2))?;
    let b3 = basic(n, x, &format!("{name}.branch3x3dbl_1"), 64, sq(1, 1, 0))?;
    let b3 = basic(n, b3, &format!("{name}.branch3x3dbl_2"), 96, sq(3, 1, 1))?;
    let b3 = basic(n, b3, &format!("{name}.branch3x3dbl_3"), 96, sq(3, 1, 1))?;
    let bp = pool_branch(n, x)?;
    let bp = basic(
        n,
        bp,
        &format!("{name}.branch_pool"),
        pool_features,
        sq(1, 1, 0),
    )?;
    n.concat(&[b1, b5, b3, bp], 1)
}

fn inception_b(n: &mut Net, x: ValueId, name: &str) -> R<ValueId> {
    let b3 = basic(n, x, &format!("{name}.branch3x3"), 384, sq(3, 2, 0))?;
    let bd = basic(n, x, &format!("{name}.branch3x3dbl_1"), 64, sq(1, 1, 0))?;
    let bd = basic(n, bd, &format!("{name}.branch3x3dbl_2"), 96, sq(3, 1, 1))?;
    let bd = basic(n, bd, &format!("{name}.branch3x3dbl_3"), 96, sq(3, 2, 0))?;
    let bp = n.max_pool(x, sq(3, 2, 0), false)?;
    n.concat(&[b3, bd, bp], 1)
}

fn inception_c(n: &mut Net, x: ValueId, name: &str, c7: i64) -> R<ValueId> {
    let one_by_seven = rect(1, 7, 0, 3);
    let seven_by_one = rect(7, 1, 3, 0);
    let b1 = basic(n, x, &format!("{name}.branch1x1"), 192, sq(1, 1, 0))?;
    let b7 = basic(n, x, &format!("{name}.branch7x7_1"), c7, sq(1, 1, 0))?;
    let b7 = basic(n, b7, &format!("{name}.branch7x7_2"), c7, one_by_seven)?;
    let b7 = basic(n, b7, &format!("{name}.branch7x7_3"), 192, seven_by_one)?;
    let bd = basic(n, x, &format!("{name}.branch7x7dbl_1"), c7, sq(1, 1, 0))?;
    let bd = basic(n, bd, &format!("{name}.branch7x7dbl_2"), c7, seven_by_one)?;
    let bd = basic(n, bd, &format!("{name}.branch7x7dbl_3"), c7, one_by_seven)?;
    let bd = basic(n, bd, &format!("{name}.branch7x7dbl_4"), c7, seven_by_one)?;
    let bd = basic(n, bd, &format!("{name}.branch7x7dbl_5"), 192, one_by_seven)?;
    let bp = pool_branch(n, x)?;
    let bp = basic(n, bp, &format!("{name}.branch_pool"), 192, sq(1, 1, 0))?;
    n.concat(&[b1, b7, bd, bp], 1)
}

fn inception_d(n: &mut Net, x: ValueId, name: &str) -> R<ValueId> {
    let b3 = basic(n, x, &format!("{name}.branch3x3_1"), 192, sq(1, 1, 0))?;
    let b3 = basic(n, b3, &format!("{name}.branch3x3_2"), 320, sq(3, 2, 0))?;
    let b7 = basic(n, x, &format!("{name}.branch7x7x3_1"), 192, sq(1, 1, 0))?;
    let b7 = basic(
        n,
        b7,
        &format!("{name}.branch7x7x3_2"),
        192,
        rect(1, 7, 0, 3),
    )?;
    let b7 = basic(
        n,
        b7,
        &format!("{name}.branch7x7x3_3"),
        192,
        rect(7, 1, 3, 0),
    )?;
    let b7 = basic(n, b7, &format!("{name}.branch7x7x3_4"), 192, sq(3, 2, 0))?;
    let bp = n.max_pool(x, sq(3, 2, 0), false)?;
    n.concat(&[b3, b7, bp], 1)
}

fn inception_e(n: &mut Net, x: ValueId, name: &str) -> R<ValueId> {
    let one_by_three = rect(1, 3, 0, 1);
    let three_by_one = rect(3, 1, 1, 0);
    let b1 = basic(n, x, &format!("{name}.branch1x1"), 320, sq(1, 1, 0))?;
    let b3 = basic(n, x, &format!("{name}.branch3x3_1"), 384, sq(1, 1, 0))?;
    let b3a = basic(n, b3, &format!("{name}.branch3x3_2a"), 384, one_by_three)?;
    let b3b = basic(n, b3, &format!("{name}.branch3x3_2b"), 384, three_by_one)?;
    let b3 = n.concat(&[b3a, b3b], 1)?;
    let bd = basic(n, x, &format!("{name}.branch3x3dbl_1"), 448, sq(1, 1, 0))?;
    let bd = basic(n, bd, &format!("{name}.branch3x3dbl_2"), 384, sq(3, 1, 1))?;
    let bda = basic(n, bd, &format!("{name}.branch3x3dbl_3a"), 384, one_by_three)?;
    let bdb = basic(n, bd, &format!("{name}.branch3x3dbl_3b"), 384, three_by_one)?;
    let bd = n.concat(&[bda, bdb], 1)?;
    let bp = pool_branch(n, x)?;
    let bp = basic(n, bp, &format!("{name}.branch_pool"), 192, sq(1, 1, 0))?;
    n.concat(&[b1, b3, bd, bp], 1)
}

pub(crate) fn inception_v3() -> R<Module> {
    let (mut n, x) = Net::image(299);
    let mut y = basic(&mut n, x, "Conv2d_1a_3x3", 32, sq(3, 2, 0))?;
    y = basic(&mut n, y, "Conv2d_2a_3x3", 32, sq(3, 1, 0))?;
    y = basic(&mut n, y, "Conv2d_2b_3x3", 64, sq(3, 1, 1))?;
    y = n.max_pool(y, sq(3, 2, 0), false)?;
    y = basic(&mut n, y, "Conv2d_3b_1x1", 80, sq(1, 1, 0))?;
    y = basic(&mut n, y, "Conv2d_4a_3x3", 192, sq(3, 1, 0))?;
    y = n.max_pool(y, sq(3, 2, 0), false)?;
    y = inception_a(&mut n, y, "Mixed_5b", 32)?;
    y = inception_a(&mut n, y, "Mixed_5c", 64)?;
    y = inception_a(&mut n, y, "Mixed_5d", 64)?;
    y = inception_b(&mut n, y, "Mixed_6a")?;
    y = inception_c(&mut n, y, "Mixed_6b", 128)?;
    y = inception_c(&mut n, y, "Mixed_6c", 160)?;
    y = inception_c(&mut n, y, "Mixed_6d", 160)?;
    y = inception_c(&mut n, y, "Mixed_6e", 192)?;
    y = inception_d(&mut n, y, "Mixed_7a")?;
    y = inception_e(&mut n, y, "Mixed_7b")?;
    y = inception_e(&mut n, y, "Mixed_7c")?;
    y = n.adaptive_avg_pool(y, 1)?;
    y = n.flatten(y)?;
    y = n.linear(y, "fc", 1000)?;
    Ok(n.finish("inception_v3", &[y]))
}
