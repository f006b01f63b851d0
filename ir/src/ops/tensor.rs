//! Shape and dtype inference of the tensor ops: elementwise, broadcasting binary and ternary,
//! reductions, shape manipulation, indexing and constants. The rules follow Relax's
//! `FInferStructInfo` (src/relax/op/tensor/*.cc) with static shapes; where Relax leaves a case
//! open (it trusts the shapes), we decide it the way numpy does and say so.

use super::infer::{
    broadcast_shapes, extent, norm_axes, norm_axis, num_elements, require_float, same_dtype,
    InferCtx,
};
use crate::attr::{Attr, AttrKind};
use crate::dtype::DType;
use crate::ty::{Shape, TensorType};

type R = Result<Vec<TensorType>, String>;

/// The most results a multi-output op (`split`) may have. Sections of an empty axis cost
/// nothing to describe, so without a bound a huge section count would exhaust memory.
pub const MAX_RESULTS: i64 = 1 << 16;

// ---- elementwise ---------------------------------------------------------------------------

/// Checks the scalar parameters of a unary op (`clip`'s bounds, `nn.leakyrelu`'s alpha): the
/// schema's float attributes.
fn float_params(c: &InferCtx<'_>) -> Result<(), String> {
    for spec in c.def.attrs.iter().filter(|s| s.kind == AttrKind::Float) {
        c.float(spec.name)?;
    }
    Ok(())
}

pub fn unary(c: &InferCtx<'_>) -> R {
    float_params(c)?;
    Ok(vec![c.operand(0).clone()])
}

/// Unary ops Relax defines on floats only (`exp`, `sigmoid`, `nn.gelu`, ...).
pub fn unary_float(c: &InferCtx<'_>) -> R {
    float_params(c)?;
    require_float(c.operand(0), "the operand")?;
    Ok(vec![c.operand(0).clone()])
}

pub fn astype(c: &InferCtx<'_>) -> R {
    Ok(vec![c.operand(0).with_dtype(c.dtype("dtype")?)])
}

/// Arithmetic with numpy broadcasting; both operands have one dtype (unlike TVM, which lets a
/// bool operand through and takes the lhs dtype, we keep the rule symmetric for commutative
/// ops).
pub fn binary(c: &InferCtx<'_>) -> R {
    let (a, b) = (c.operand(0), c.operand(1));
    let dtype = same_dtype(a, b)?;
    Ok(vec![TensorType {
        shape: broadcast_shapes(&a.shape, &b.shape)?,
        dtype,
    }])
}

pub fn compare(c: &InferCtx<'_>) -> R {
    let (a, b) = (c.operand(0), c.operand(1));
    same_dtype(a, b)?;
    Ok(vec![TensorType {
        shape: broadcast_shapes(&a.shape, &b.shape)?,
        dtype: DType::Bool,
    }])
}

/// `where(cond, a, b)`: a bool condition, one value dtype, all three shapes broadcast.
pub fn where_(c: &InferCtx<'_>) -> R {
    let (cond, a, b) = (c.operand(0), c.operand(1), c.operand(2));
    if cond.dtype != DType::Bool {
        return Err(format!(
            "the condition must have dtype bool (i1), got {cond}"
        ));
    }
    let dtype = same_dtype(a, b)?;
    let shape = broadcast_shapes(&cond.shape, &broadcast_shapes(&a.shape, &b.shape)?)?;
    Ok(vec![TensorType { shape, dtype }])
}

// ---- reductions ----------------------------------------------------------------------------

/// The shape left after reducing `axes` (all axes when `None`), keeping unit dims if asked.
fn reduced_shape(shape: &[i64], axes: Option<&[usize]>, keepdims: bool) -> Shape {
    let reduced = |i: usize| axes.is_none_or(|a| a.contains(&i));
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (reduced(i), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// `sum`, `mean`, `max`, `min`, `prod`: `axis` absent reduces every axis; an empty list
/// reduces none (as in Relax).
pub fn reduce(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let axes = c
        .opt_ints("axis")?
        .map(|a| norm_axes(&a, data.rank()))
        .transpose()?;
    let shape = reduced_shape(&data.shape, axes.as_deref(), c.bool("keepdims")?);
    Ok(vec![data.with_shape(shape)])
}

/// `argmax`, `argmin`: one axis or all; the result is int64.
pub fn arg_reduce(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let axis = c
        .opt_int("axis")?
        .map(|a| norm_axis(a, data.rank()))
        .transpose()?;
    let axes = axis.map(|a| [a]);
    let shape = reduced_shape(
        &data.shape,
        axes.as_ref().map(|a| &a[..]),
        c.bool("keepdims")?,
    );
    Ok(vec![TensorType {
        shape,
        dtype: DType::I64,
    }])
}

// ---- shape manipulation --------------------------------------------------------------------

fn non_negative(name: &str, v: &[i64]) -> Result<(), String> {
    match v.iter().find(|&&x| x < 0) {
        Some(x) => Err(format!(
            "attribute '{name}' must not be negative, got {x} in {v:?}"
        )),
        None => Ok(()),
    }
}

/// `reshape`: one `-1` is inferred from the element count, which must be preserved.
pub fn reshape(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let target = c.ints("shape")?;
    let total = num_elements(&data.shape)?;
    if let Some(x) = target.iter().find(|&&x| x < -1) {
        return Err(format!(
            "attribute 'shape' {target:?} has an invalid extent {x}"
        ));
    }
    let inferred: Vec<usize> = (0..target.len()).filter(|&i| target[i] == -1).collect();
    let known = num_elements(
        &target
            .iter()
            .copied()
            .filter(|&x| x != -1)
            .collect::<Vec<_>>(),
    )?;
    let mut shape: Shape = target.iter().copied().collect();
    match inferred[..] {
        [] if known != total => {
            return Err(format!(
                "cannot reshape {data} ({total} elements) to {target:?} ({known} elements)"
            ))
        }
        [] => {}
        [i] => {
            if known == 0 || total % known != 0 {
                return Err(format!(
                    "cannot reshape {data} ({total} elements) to {target:?}: -1 cannot be inferred"
                ));
            }
            shape[i] = total / known;
        }
        _ => return Err(format!("attribute 'shape' {target:?} has more than one -1")),
    }
    Ok(vec![data.with_shape(shape)])
}

/// `permute_dims`: `axes` absent reverses the dims.
pub fn permute_dims(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let rank = data.rank();
    let axes = match c.opt_ints("axes")? {
        None => (0..rank).rev().collect(),
        Some(a) => {
            if a.len() != rank {
                return Err(format!(
                    "attribute 'axes' {a:?} must have one entry per dim of {data}"
                ));
            }
            norm_axes(&a, rank)?
        }
    };
    Ok(vec![data.with_shape(axes.iter().map(|&a| data.shape[a]))])
}

/// `concat`: same rank and dtype, equal extents except along `axis`.
pub fn concat(c: &InferCtx<'_>) -> R {
    let first = c.operand(0);
    let axis = norm_axis(c.int("axis")?, first.rank())?;
    let mut total: i128 = 0;
    for (i, t) in c.operands.iter().enumerate() {
        if t.dtype != first.dtype {
            return Err(format!(
                "operand {i} {t} has another dtype than operand 0 {first}"
            ));
        }
        let same_other_dims = t.rank() == first.rank()
            && (0..t.rank()).all(|d| d == axis || t.shape[d] == first.shape[d]);
        if !same_other_dims {
            return Err(format!(
                "operand {i} {t} does not match operand 0 {first} outside axis {axis}"
            ));
        }
        total += t.shape[axis] as i128;
    }
    let mut shape = first.shape.clone();
    shape[axis] = extent(total, "concatenated extent")?;
    Ok(vec![first.with_shape(shape)])
}

/// `split`: into `n` sections of `ceil(len / n)` (the last one shorter), or at the given
/// indices (each clamped to the axis, empty pieces allowed), as Relax does. One result per
/// piece.
pub fn split(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let axis = norm_axis(c.int("axis")?, data.rank())?;
    let len = data.shape[axis];
    let piece = |extent: i64| {
        let mut shape = data.shape.clone();
        shape[axis] = extent;
        data.with_shape(shape)
    };
    match c.attr("indices_or_sections") {
        Some(Attr::Int(n)) => {
            if n <= 0 || n > MAX_RESULTS {
                return Err(format!(
                    "attribute 'indices_or_sections': the number of sections must be in 1..={MAX_RESULTS}, got {n}"
                ));
            }
            let size = len / n + i64::from(len % n != 0);
            let last = len as i128 - size as i128 * (n as i128 - 1);
            if last < 0 {
                return Err(format!(
                    "cannot split axis {axis} of {data} into {n} sections of {size}"
                ));
            }
            let mut out = vec![piece(size); (n - 1) as usize];
            out.push(piece(last as i64));
            Ok(out)
        }
        Some(a @ Attr::List(_)) => {
            let indices = a
                .as_ints()
                .ok_or("attribute 'indices_or_sections' must hold ints")?;
            if indices.len() as i64 >= MAX_RESULTS {
                return Err(format!(
                    "attribute 'indices_or_sections' has {} indices, more than {MAX_RESULTS} results",
                    indices.len()
                ));
            }
            let bounds: Vec<i64> = std::iter::once(0)
                .chain(indices.iter().map(|&i| i.clamp(0, len)))
                .chain(std::iter::once(len))
                .collect();
            Ok(bounds
                .windows(2)
                .map(|w| piece((w[1] - w[0]).max(0)))
                .collect())
        }
        Some(_) => Err("attribute 'indices_or_sections' must be an int or a list of ints".into()),
        None => Err("missing required attribute 'indices_or_sections'".into()),
    }
}

/// The extent of a numpy slice `begin:end:stride` of an axis of length `dim` (stride != 0):
/// negative indices count from the end, out-of-range ones are clamped, and an empty range
/// gives 0 (TVM's static path rejects begin > end; numpy and ONNX give an empty slice).
fn slice_extent(dim: i64, begin: i64, end: i64, stride: i64) -> i64 {
    let (n, s) = (dim as i128, stride as i128);
    let canon = |i: i64| {
        let i = if i < 0 { i as i128 + n } else { i as i128 };
        if s < 0 {
            i.clamp(-1, n - 1)
        } else {
            i.clamp(0, n)
        }
    };
    let (b, e) = (canon(begin), canon(end));
    let len = if s > 0 {
        if e > b {
            (e - b - 1) / s + 1
        } else {
            0
        }
    } else if b > e {
        (b - e - 1) / -s + 1
    } else {
        0
    };
    // At most `dim`, so it fits.
    len as i64
}

pub fn strided_slice(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let axes_attr = c.ints("axes")?;
    let begin = c.ints("begin")?;
    let end = c.ints("end")?;
    let strides = c
        .opt_ints("strides")?
        .unwrap_or_else(|| vec![1; axes_attr.len()]);
    if begin.len() != axes_attr.len()
        || end.len() != axes_attr.len()
        || strides.len() != axes_attr.len()
    {
        return Err(format!(
            "attributes 'axes', 'begin', 'end' and 'strides' must have one entry per axis, got {}, {}, {} and {}",
            axes_attr.len(),
            begin.len(),
            end.len(),
            strides.len()
        ));
    }
    let axes = norm_axes(&axes_attr, data.rank())?;
    let mut shape = data.shape.clone();
    for (k, &a) in axes.iter().enumerate() {
        if strides[k] == 0 {
            return Err(format!("attribute 'strides' {strides:?} contains 0"));
        }
        shape[a] = slice_extent(data.shape[a], begin[k], end[k], strides[k]);
    }
    Ok(vec![data.with_shape(shape)])
}

/// `squeeze`: drops the given unit dims, or every unit dim when `axis` is absent.
pub fn squeeze(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let axes = match c.opt_ints("axis")? {
        None => (0..data.rank()).filter(|&i| data.shape[i] == 1).collect(),
        Some(a) => norm_axes(&a, data.rank())?,
    };
    if let Some(&a) = axes.iter().find(|&&a| data.shape[a] != 1) {
        return Err(format!(
            "cannot squeeze axis {a} of {data}: its extent is not 1"
        ));
    }
    let shape = (0..data.rank())
        .filter(|i| !axes.contains(i))
        .map(|i| data.shape[i]);
    Ok(vec![data.with_shape(shape)])
}

/// `expand_dims`: inserts unit dims at `axis`, positions in the result.
pub fn expand_dims(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let axes_attr = c.ints("axis")?;
    let rank = data.rank() + axes_attr.len();
    let axes = norm_axes(&axes_attr, rank)?;
    let mut rest = data.shape.iter();
    let shape = (0..rank).map(|i| {
        if axes.contains(&i) {
            1
        } else {
            *rest.next().unwrap_or(&1)
        }
    });
    Ok(vec![data.with_shape(shape)])
}

/// `flatten` (Relax): to 1-D; a scalar becomes `[1]`.
pub fn flatten(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    Ok(vec![data.with_shape([num_elements(&data.shape)?])])
}

/// `take(data, indices)` as numpy: along `axis` the axis is replaced by the indices' dims;
/// without `axis` data is taken as flattened (Relax requires 1-D data there, where both
/// agree), so the result has the indices' shape.
pub fn take(c: &InferCtx<'_>) -> R {
    let (data, indices) = (c.operand(0), c.operand(1));
    if !indices.dtype.is_int() {
        return Err(format!("indices must have an integer dtype, got {indices}"));
    }
    c.choice("mode", &["fast", "clip", "wrap"])?;
    let shape: Shape = match c.opt_int("axis")? {
        None => indices.shape.clone(),
        Some(a) => {
            let axis = norm_axis(a, data.rank())?;
            let mut s: Shape = data.shape[..axis].iter().copied().collect();
            s.extend_from_slice(&indices.shape);
            s.extend_from_slice(&data.shape[axis + 1..]);
            s
        }
    };
    Ok(vec![data.with_shape(shape)])
}

/// `broadcast_to`: numpy broadcasting of data to exactly `shape`.
pub fn broadcast_to(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let target = c.ints("shape")?;
    non_negative("shape", &target)?;
    let fits = target.len() >= data.rank()
        && data
            .shape
            .iter()
            .zip(&target[target.len() - data.rank()..])
            .all(|(&d, &t)| d == t || d == 1);
    if !fits {
        return Err(format!("cannot broadcast {data} to {target:?}"));
    }
    Ok(vec![data.with_shape(target)])
}

/// `tile`: numpy semantics; the shorter of shape and repeats is padded with leading ones.
pub fn tile(c: &InferCtx<'_>) -> R {
    let data = c.operand(0);
    let repeats = c.ints("repeats")?;
    non_negative("repeats", &repeats)?;
    let rank = data.rank().max(repeats.len());
    let padded = |v: &[i64], i: usize| {
        if i + v.len() >= rank {
            v[i + v.len() - rank]
        } else {
            1
        }
    };
    let shape = (0..rank)
        .map(|i| {
            let v = padded(&data.shape, i) as i128 * padded(&repeats, i) as i128;
            extent(v, &format!("tiled extent of axis {i}"))
        })
        .collect::<Result<Shape, String>>()?;
    Ok(vec![data.with_shape(shape)])
}

// ---- constants -----------------------------------------------------------------------------

/// `constant`: `value` holds every element in row-major order, or one element to splat.
pub fn constant(c: &InferCtx<'_>) -> R {
    let shape = c.ints("shape")?;
    non_negative("shape", &shape)?;
    let dtype = c.dtype("dtype")?;
    let count = num_elements(&shape)?;
    let values = match c.attrs.get("value") {
        None => return Err("missing required attribute 'value'".into()),
        Some(Attr::List(v)) => v,
        Some(_) => return Err("attribute 'value' must be a list of numbers".into()),
    };
    if values.len() as i64 != count && values.len() != 1 {
        return Err(format!(
            "attribute 'value' has {} elements; shape {shape:?} needs {count} (or 1 to splat)",
            values.len()
        ));
    }
    for v in values {
        let integral = match v {
            Attr::Int(_) => true,
            Attr::Float(f) => f.fract() == 0.0,
            _ => return Err("attribute 'value' must be a list of numbers".into()),
        };
        if !dtype.is_float() && !integral {
            return Err(format!(
                "attribute 'value' holds a non-integral value {v:?} for dtype {}",
                dtype.tvm_name()
            ));
        }
    }
    Ok(vec![TensorType::new(dtype, shape)])
}
