//! Shape and dtype inference of the neural-network ops: convolutions, linear algebra,
//! normalization, pooling, padding and resizing. The rules follow Relax's `FInferStructInfo`
//! (src/relax/op/nn/*.cc, src/relax/op/tensor/linear_algebra.cc), with static shapes only.

use super::infer::{
    broadcast_shapes, extent, norm_axes, norm_axis, require_float, require_rank, same_dtype,
    window_out, InferCtx, Layout4,
};
use crate::dtype::DType;
use crate::ty::{Shape, TensorType};

type R = Result<Vec<TensorType>, String>;

/// `out_dtype` if given, else the common dtype of data and weight.
fn out_dtype(c: &InferCtx<'_>, a: &TensorType, b: &TensorType) -> Result<DType, String> {
    match c.opt_dtype("out_dtype")? {
        Some(d) => Ok(d),
        None => same_dtype(a, b),
    }
}

fn groups(c: &InferCtx<'_>) -> Result<i64, String> {
    let g = c.int("groups")?;
    if g <= 0 {
        return Err(format!("attribute 'groups' must be positive, got {g}"));
    }
    Ok(g)
}

fn positive_kernel(kh: i64, kw: i64, weight: &TensorType) -> Result<(), String> {
    if kh <= 0 || kw <= 0 {
        return Err(format!(
            "weight {weight} has an empty kernel window ({kh}x{kw})"
        ));
    }
    Ok(())
}

/// The data and output layouts of a 2-D op (`out_layout` defaults to the data layout).
fn data_layouts(c: &InferCtx<'_>, data_attr: &str) -> Result<(Layout4, Layout4), String> {
    let data = Layout4::parse(&c.string(data_attr)?, "NCHW", data_attr)?;
    let out = match c.opt_string("out_layout")? {
        Some(l) => Layout4::parse(&l, "NCHW", "out_layout")?,
        None => data,
    };
    Ok((data, out))
}

/// `nn.conv2d`: data `NCHW` (any permutation), weight `OIHW` (any permutation, e.g. `HWIO`)
/// with `I = C / groups` and `O` a multiple of `groups`.
pub fn conv2d(c: &InferCtx<'_>) -> R {
    let (data, weight) = (c.operand(0), c.operand(1));
    let (data_layout, out_layout) = data_layouts(c, "data_layout")?;
    let kernel_layout = Layout4::parse(&c.string("kernel_layout")?, "OIHW", "kernel_layout")?;
    let [n, ch, h, w] = data_layout.to_canonical(data, "data")?;
    let [o, i, kh, kw] = kernel_layout.to_canonical(weight, "weight")?;
    let [sh, sw] = c.positive_pair("strides")?;
    let [dh, dw] = c.positive_pair("dilation")?;
    let [pt, pl, pb, pr] = c.padding_2d("padding")?;
    let g = groups(c)?;
    let dtype = out_dtype(c, data, weight)?;
    if i.checked_mul(g) != Some(ch) {
        return Err(format!(
            "data channels ({ch}) must equal weight input channels ({i}) times groups ({g})"
        ));
    }
    if o % g != 0 {
        return Err(format!(
            "weight output channels ({o}) are not divisible by groups ({g})"
        ));
    }
    positive_kernel(kh, kw, weight)?;
    let oh = window_out(h, pt, pb, kh, sh, dh, false, "output height")?;
    let ow = window_out(w, pl, pr, kw, sw, dw, false, "output width")?;
    Ok(vec![TensorType {
        shape: out_layout.shape_of([n, o, oh, ow]),
        dtype,
    }])
}

/// `nn.conv2d_transpose`: weight `IOHW` with `I = C` and `O * groups` output channels;
/// `out = (in - 1) * stride - pads + dilation * (k - 1) + output_padding + 1`.
pub fn conv2d_transpose(c: &InferCtx<'_>) -> R {
    let (data, weight) = (c.operand(0), c.operand(1));
    let (data_layout, out_layout) = data_layouts(c, "data_layout")?;
    let kernel_layout = Layout4::parse(&c.string("kernel_layout")?, "IOHW", "kernel_layout")?;
    let [n, ch, h, w] = data_layout.to_canonical(data, "data")?;
    let [i, o, kh, kw] = kernel_layout.to_canonical(weight, "weight")?;
    let strides = c.positive_pair("strides")?;
    let dilation = c.positive_pair("dilation")?;
    let [pt, pl, pb, pr] = c.padding_2d("padding")?;
    let output_padding = c.ints_n("output_padding", 2)?;
    let g = groups(c)?;
    let dtype = out_dtype(c, data, weight)?;
    if ch != i {
        return Err(format!(
            "data channels ({ch}) must equal weight input channels ({i})"
        ));
    }
    if i % g != 0 {
        return Err(format!(
            "weight input channels ({i}) are not divisible by groups ({g})"
        ));
    }
    for k in 0..2 {
        if output_padding[k] < 0 || output_padding[k] >= strides[k] {
            return Err(format!(
                "attribute 'output_padding' {output_padding:?} must be non-negative and less than the strides {strides:?}"
            ));
        }
    }
    positive_kernel(kh, kw, weight)?;
    // (in - 1) * stride - pads + dilation * (k - 1) + output_padding + 1, checked: the terms
    // are i64 products, so their sum can approach the i128 limit.
    let spatial = |input: i64, k: i64, pads: i128, axis: usize, what: &str| {
        let v = (input as i128 - 1)
            .checked_mul(strides[axis] as i128)
            .and_then(|v| v.checked_add(dilation[axis] as i128 * (k as i128 - 1)))
            .and_then(|v| v.checked_add(output_padding[axis] as i128 + 1 - pads))
            .ok_or_else(|| format!("{what} overflows"))?;
        if v <= 0 {
            return Err(format!(
                "{what} would be {v}: the input is too small for the padding"
            ));
        }
        extent(v, what)
    };
    let oh = spatial(h, kh, pt as i128 + pb as i128, 0, "output height")?;
    let ow = spatial(w, kw, pl as i128 + pr as i128, 1, "output width")?;
    let oc = extent(o as i128 * g as i128, "output channels")?;
    Ok(vec![TensorType {
        shape: out_layout.shape_of([n, oc, oh, ow]),
        dtype,
    }])
}

/// `matmul` with numpy semantics: 1-D operands get a unit dim prepended (lhs) or appended
/// (rhs) that is removed again from the result; leading dims broadcast.
pub fn matmul(c: &InferCtx<'_>) -> R {
    let (a, b) = (c.operand(0), c.operand(1));
    let dtype = out_dtype(c, a, b)?;
    if a.rank() == 0 || b.rank() == 0 {
        return Err(format!("operands must not be scalars, got {a} and {b}"));
    }
    let (ra, rb) = (a.rank(), b.rank());
    // Matrix dims of each operand after promoting 1-D operands.
    let (m, ka) = if ra == 1 {
        (None, a.shape[0])
    } else {
        (Some(a.shape[ra - 2]), a.shape[ra - 1])
    };
    let (kb, n) = if rb == 1 {
        (b.shape[0], None)
    } else {
        (b.shape[rb - 2], Some(b.shape[rb - 1]))
    };
    if ka != kb {
        return Err(format!("reduction dims differ: {a} has {ka}, {b} has {kb}"));
    }
    let batch_a = &a.shape[..ra.saturating_sub(2)];
    let batch_b = &b.shape[..rb.saturating_sub(2)];
    let mut shape = broadcast_shapes(batch_a, batch_b)
        .map_err(|e| format!("batch dims do not broadcast: {e}"))?;
    shape.extend(m);
    shape.extend(n);
    Ok(vec![TensorType { shape, dtype }])
}

/// `nn.dense` (Relay): data `[..., K]`, weight `[N, K]` -> `[..., N]`.
pub fn dense(c: &InferCtx<'_>) -> R {
    let (data, weight) = (c.operand(0), c.operand(1));
    let dtype = out_dtype(c, data, weight)?;
    require_rank(weight, 2, "weight")?;
    let Some(&k) = data.shape.last() else {
        return Err(format!("data must have rank at least 1, got {data}"));
    };
    let (n, kw) = (weight.shape[0], weight.shape[1]);
    if k != kw {
        return Err(format!(
            "reduction dims differ: data {data} has {k}, weight {weight} has {kw}"
        ));
    }
    if let Some(units) = c.opt_int("units")? {
        if units != n {
            return Err(format!(
                "attribute 'units' ({units}) does not match weight {weight}"
            ));
        }
    }
    let mut shape: Shape = data.shape.clone();
    shape.pop();
    shape.push(n);
    Ok(vec![TensorType { shape, dtype }])
}

/// `nn.batch_matmul` (Relay): `a [B, M, K]` (or `[B, K, M]` with `transpose_a`) times
/// `b [B, N, K]` (`transpose_b`, the default) or `[B, K, N]`; a batch of 1 broadcasts.
pub fn batch_matmul(c: &InferCtx<'_>) -> R {
    let (a, b) = (c.operand(0), c.operand(1));
    let dtype = out_dtype(c, a, b)?;
    require_rank(a, 3, "lhs")?;
    require_rank(b, 3, "rhs")?;
    let (ta, tb) = (c.bool("transpose_a")?, c.bool("transpose_b")?);
    let (m, ka) = if ta {
        (a.shape[2], a.shape[1])
    } else {
        (a.shape[1], a.shape[2])
    };
    let (n, kb) = if tb {
        (b.shape[1], b.shape[2])
    } else {
        (b.shape[2], b.shape[1])
    };
    if ka != kb {
        return Err(format!(
            "reduction dims differ: {a} has {ka}, {b} has {kb} (transpose_a={ta}, transpose_b={tb})"
        ));
    }
    let batch = match (a.shape[0], b.shape[0]) {
        (x, y) if x == y => x,
        (1, y) => y,
        (x, 1) => x,
        (x, y) => return Err(format!("batch dims differ: {x} and {y}")),
    };
    Ok(vec![TensorType::new(dtype, [batch, m, n])])
}

/// The normalized axes of a norm op and the data extents along them. The other operands
/// (gamma, beta, ...) must have exactly those extents and the data's float dtype.
fn check_norm_params(c: &InferCtx<'_>, axes: &[i64], names: &[&str]) -> R {
    c.float("epsilon")?;
    c.bool("center")?;
    c.bool("scale")?;
    let data = c.operand(0);
    require_float(data, "data")?;
    let axes = norm_axes(axes, data.rank())?;
    let expected: Shape = axes.iter().map(|&a| data.shape[a]).collect();
    for (i, name) in names.iter().enumerate() {
        let t = c.operand(i + 1);
        if t.dtype != data.dtype {
            return Err(format!(
                "{name} dtype {} differs from data dtype {}",
                t.dtype, data.dtype
            ));
        }
        if t.shape != expected {
            return Err(format!(
                "{name} must have shape {:?} (data {data} along axes {axes:?}), got {t}",
                expected.as_slice()
            ));
        }
    }
    Ok(vec![data.clone()])
}

/// `nn.batch_norm` in inference form: one result, shaped like data.
pub fn batch_norm(c: &InferCtx<'_>) -> R {
    check_norm_params(
        c,
        &[c.int("axis")?],
        &["gamma", "beta", "moving_mean", "moving_var"],
    )
}

pub fn layer_norm(c: &InferCtx<'_>) -> R {
    check_norm_params(c, &c.ints("axes")?, &["gamma", "beta"])
}

/// `nn.softmax`, `nn.log_softmax`: float data, a valid axis.
pub fn softmax(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    require_float(data, "data")?;
    norm_axis(c.int("axis")?, data.rank())?;
    Ok(vec![data.clone()])
}

/// `nn.max_pool2d`, `nn.avg_pool2d`.
pub fn pool2d(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let (layout, out_layout) = data_layouts(c, "layout")?;
    let [n, ch, h, w] = layout.to_canonical(data, "data")?;
    let [kh, kw] = c.positive_pair("pool_size")?;
    let [sh, sw] = c.positive_pair("strides")?;
    let [dh, dw] = c.positive_pair("dilation")?;
    let [pt, pl, pb, pr] = c.padding_2d("padding")?;
    let ceil_mode = c.bool("ceil_mode")?;
    if c.def.attr_spec("count_include_pad").is_some() {
        c.bool("count_include_pad")?;
    }
    let oh = window_out(h, pt, pb, kh, sh, dh, ceil_mode, "output height")?;
    let ow = window_out(w, pl, pr, kw, sw, dw, ceil_mode, "output width")?;
    Ok(vec![data.with_shape(out_layout.shape_of([n, ch, oh, ow]))])
}

pub fn adaptive_pool2d(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let (layout, out_layout) = data_layouts(c, "layout")?;
    let [n, ch, h, w] = layout.to_canonical(data, "data")?;
    let [oh, ow] = match c.opt_ints("output_size")? {
        None => [h, w],
        Some(_) => c.positive_pair("output_size")?,
    };
    Ok(vec![data.with_shape(out_layout.shape_of([n, ch, oh, ow]))])
}

/// `nn.pad`: `pad_width = [before_0, after_0, before_1, after_1, ...]`.
pub fn pad(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let widths = c.ints("pad_width")?;
    c.choice(
        "pad_mode",
        &["constant", "reflect", "replicate", "circular"],
    )?;
    c.float("pad_value")?;
    if widths.len() != 2 * data.rank() {
        return Err(format!(
            "attribute 'pad_width' must have 2 * rank = {} elements for {data}, got {}",
            2 * data.rank(),
            widths.len()
        ));
    }
    if let Some(x) = widths.iter().find(|&&x| x < 0) {
        return Err(format!(
            "attribute 'pad_width' must not be negative, got {x} in {widths:?}"
        ));
    }
    let shape = data
        .shape
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let v = d as i128 + widths[2 * i] as i128 + widths[2 * i + 1] as i128;
            extent(v, &format!("padded extent of axis {i}"))
        })
        .collect::<Result<Shape, String>>()?;
    Ok(vec![data.with_shape(shape)])
}

/// `image.resize2d`: the spatial dims become `size`; the dtype is `out_dtype` if given.
pub fn resize2d(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let layout = Layout4::parse(&c.string("layout")?, "NCHW", "layout")?;
    let [n, ch, _, _] = layout.to_canonical(data, "data")?;
    let size = c.ints_n("size", 2)?;
    if let Some(x) = size.iter().find(|&&x| x < 0) {
        return Err(format!(
            "attribute 'size' must not be negative, got {x} in {size:?}"
        ));
    }
    let roi = c.floats("roi")?;
    if roi.len() != 4 {
        return Err(format!(
            "attribute 'roi' must have 4 elements, got {}",
            roi.len()
        ));
    }
    c.choice("method", &["nearest_neighbor", "linear", "cubic"])?;
    c.choice(
        "coordinate_transformation_mode",
        &[
            "half_pixel",
            "align_corners",
            "asymmetric",
            "pytorch_half_pixel",
            "tf_half_pixel_for_nn",
            "tf_crop_and_resize",
        ],
    )?;
    c.choice(
        "rounding_method",
        &[
            "",
            "round",
            "floor",
            "ceil",
            "round_prefer_floor",
            "round_prefer_ceil",
        ],
    )?;
    c.float("cubic_alpha")?;
    c.int("cubic_exclude")?;
    c.float("extrapolation_value")?;
    let dtype = c.opt_dtype("out_dtype")?.unwrap_or(data.dtype);
    Ok(vec![TensorType {
        shape: layout.shape_of([n, ch, size[0], size[1]]),
        dtype,
    }])
}
