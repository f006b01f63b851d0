//! A small constant evaluator over IR ops, as TVM's FoldConstant and onnx-simplifier do: when
//! every operand of an op is a known constant the frontend computes the result here instead of
//! emitting a binding. That is what turns exporter shape arithmetic
//! (`Shape -> Gather -> Unsqueeze -> Concat -> Reshape`) into a static `reshape`.
//!
//! The evaluator knows Relax semantics of the ops it supports (broadcasting elementwise math,
//! comparisons, `astype`, layout ops, `take`, `strided_slice`, reductions, `where`, `clip`).
//! It answers `Ok(None)` for an op it does not evaluate or a result above the size limit, and
//! the caller then emits the op instead. Integer arithmetic is checked; overflow and division
//! by zero are errors, never panics.

use super::error::{bail, PResult};
use super::tensor::{num_elements, round_to, wrap_int, Data, Tensor};
use crate::attr::{Attr, Attrs};
use crate::dtype::DType;

/// Evaluates `op` on constant operands. `max_elements` bounds every result.
pub(crate) fn eval(
    op: &str,
    inputs: &[&Tensor],
    attrs: &Attrs,
    max_elements: usize,
) -> PResult<Option<Vec<Tensor>>> {
    let n_in = inputs.len();
    let arity = |n: usize| -> PResult<()> {
        if n_in != n {
            bail!("'{op}' takes {n} operands, got {n_in}");
        }
        Ok(())
    };
    let out = match op {
        "add" | "subtract" | "multiply" | "divide" | "floor_divide" | "power" | "maximum"
        | "minimum" | "equal" | "not_equal" | "less" | "less_equal" | "greater"
        | "greater_equal" => {
            arity(2)?;
            binary(op, inputs[0], inputs[1], max_elements)?
        }
        "negative" | "abs" | "sqrt" | "rsqrt" | "exp" | "log" | "floor" | "ceil" | "round"
        | "sigmoid" | "tanh" | "sin" | "cos" | "nn.relu" => {
            arity(1)?;
            unary(op, inputs[0])?
        }
        "astype" => {
            arity(1)?;
            let dtype = dtype_attr(attrs, "dtype")?;
            Some(astype(inputs[0], dtype))
        }
        "clip" => {
            arity(1)?;
            let lo = float_attr(attrs, "min")?;
            let hi = float_attr(attrs, "max")?;
            let t = inputs[0];
            let data = match &t.data {
                Data::Float(v) => Data::Float(
                    v.iter()
                        .map(|x| round_to(t.dtype, x.max(lo).min(hi)))
                        .collect(),
                ),
                Data::Int(v) => Data::Int(
                    v.iter()
                        .map(|x| (*x as f64).max(lo).min(hi) as i64)
                        .collect(),
                ),
            };
            Some(Tensor::new(t.dtype, t.shape.clone(), data))
        }
        "reshape" => {
            arity(1)?;
            let shape = ints_attr(attrs, "shape")?;
            Some(reshape(inputs[0], &shape)?)
        }
        "permute_dims" => {
            arity(1)?;
            permute(
                inputs[0],
                attrs.get("axes").and_then(Attr::as_ints),
                max_elements,
            )?
        }
        "expand_dims" => {
            arity(1)?;
            let axes = axes_attr(attrs, "axis")?;
            Some(expand_dims(inputs[0], &axes)?)
        }
        "squeeze" => {
            arity(1)?;
            let axes = match attrs.get("axis") {
                None => None,
                Some(_) => Some(axes_attr(attrs, "axis")?),
            };
            Some(squeeze(inputs[0], axes.as_deref())?)
        }
        "concat" => concat(inputs, int_attr(attrs, "axis").unwrap_or(0), max_elements)?,
        "strided_slice" => {
            arity(1)?;
            strided_slice(inputs[0], attrs, max_elements)?
        }
        "take" => {
            arity(2)?;
            take(inputs[0], inputs[1], int_attr(attrs, "axis")?, max_elements)?
        }
        "broadcast_to" => {
            arity(1)?;
            let shape = ints_attr(attrs, "shape")?;
            broadcast_to(inputs[0], &shape, max_elements)?
        }
        "where" => {
            arity(3)?;
            where_(inputs[0], inputs[1], inputs[2], max_elements)?
        }
        "sum" | "mean" | "max" | "min" | "prod" => {
            arity(1)?;
            reduce(op, inputs[0], attrs)?
        }
        _ => None,
    };
    Ok(out.map(|t| vec![t]))
}

fn int_attr(attrs: &Attrs, name: &str) -> PResult<i64> {
    match attrs.get(name).and_then(Attr::as_int) {
        Some(v) => Ok(v),
        None => bail!("attribute '{name}' must be an int"),
    }
}

fn float_attr(attrs: &Attrs, name: &str) -> PResult<f64> {
    match attrs.get(name).and_then(Attr::as_float) {
        Some(v) => Ok(v),
        None => bail!("attribute '{name}' must be a float"),
    }
}

fn ints_attr(attrs: &Attrs, name: &str) -> PResult<Vec<i64>> {
    match attrs.get(name).and_then(Attr::as_ints) {
        Some(v) => Ok(v),
        None => bail!("attribute '{name}' must be a list of ints"),
    }
}

/// An axis list attribute that may also be a single int.
fn axes_attr(attrs: &Attrs, name: &str) -> PResult<Vec<i64>> {
    match attrs.get(name) {
        Some(Attr::Int(v)) => Ok(vec![*v]),
        _ => ints_attr(attrs, name),
    }
}

fn dtype_attr(attrs: &Attrs, name: &str) -> PResult<DType> {
    match attrs
        .get(name)
        .and_then(Attr::as_str)
        .and_then(DType::from_tvm_name)
    {
        Some(d) => Ok(d),
        None => bail!("attribute '{name}' must be a dtype name"),
    }
}

/// Normalizes `axis` (possibly negative) against `rank`.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> PResult<usize> {
    let r = rank as i64;
    let a = if axis < 0 {
        axis.checked_add(r)
    } else {
        Some(axis)
    };
    match a {
        Some(a) if (0..r).contains(&a) => Ok(a as usize),
        _ => bail!("axis {axis} is out of range for rank {rank}"),
    }
}

fn strides(shape: &[i64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

/// Numpy broadcast of two shapes (the op registry's rule, with the frontend's error).
pub(crate) fn broadcast_shape(a: &[i64], b: &[i64]) -> PResult<Vec<i64>> {
    match crate::ops::broadcast_shapes(a, b) {
        Ok(shape) => Ok(shape.to_vec()),
        Err(_) => bail!("shapes {a:?} and {b:?} do not broadcast"),
    }
}

/// For each element of `out_shape`, the index of the element of a tensor of `in_shape` that
/// broadcasts to it.
fn broadcast_map(in_shape: &[i64], out_shape: &[i64]) -> Vec<usize> {
    let n: usize = out_shape.iter().map(|d| *d as usize).product();
    let offset = out_shape.len() - in_shape.len();
    let in_strides = strides(in_shape);
    let mut idx = vec![0usize; out_shape.len()];
    let mut map = Vec::with_capacity(n);
    for _ in 0..n {
        let mut src = 0;
        for (k, &i) in idx.iter().enumerate().skip(offset) {
            if in_shape[k - offset] != 1 {
                src += i * in_strides[k - offset];
            }
        }
        map.push(src);
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if (idx[k] as i64) < out_shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    map
}

fn gather(data: &Data, map: &[usize]) -> Data {
    match data {
        Data::Int(v) => Data::Int(map.iter().map(|&i| v[i]).collect()),
        Data::Float(v) => Data::Float(map.iter().map(|&i| v[i]).collect()),
    }
}

fn too_big(shape: &[i64], max_elements: usize) -> PResult<bool> {
    Ok(num_elements(shape)? > max_elements)
}

fn binary(op: &str, a: &Tensor, b: &Tensor, max_elements: usize) -> PResult<Option<Tensor>> {
    if a.dtype != b.dtype {
        bail!("operand dtypes differ: {} and {}", a.dtype, b.dtype);
    }
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    if too_big(&shape, max_elements)? {
        return Ok(None);
    }
    let ma = broadcast_map(&a.shape, &shape);
    let mb = broadcast_map(&b.shape, &shape);
    let compare = matches!(
        op,
        "equal" | "not_equal" | "less" | "less_equal" | "greater" | "greater_equal"
    );
    let dtype = a.dtype;
    let data = match (&a.data, &b.data) {
        (Data::Int(x), Data::Int(y)) => {
            let mut out = Vec::with_capacity(ma.len());
            for (&i, &j) in ma.iter().zip(&mb) {
                out.push(int_binary(op, x[i], y[j])?);
            }
            if compare {
                Data::Int(out)
            } else {
                Data::Int(out.into_iter().map(|v| wrap_int(dtype, v)).collect())
            }
        }
        (Data::Float(x), Data::Float(y)) => {
            if compare {
                Data::Int(
                    ma.iter()
                        .zip(&mb)
                        .map(|(&i, &j)| float_compare(op, x[i], y[j]))
                        .collect(),
                )
            } else {
                Data::Float(
                    ma.iter()
                        .zip(&mb)
                        .map(|(&i, &j)| round_to(dtype, float_binary(op, x[i], y[j])))
                        .collect(),
                )
            }
        }
        _ => bail!("operand dtypes differ"),
    };
    let dtype = if compare { DType::Bool } else { dtype };
    Ok(Some(Tensor::new(dtype, shape, data)))
}

fn int_binary(op: &str, x: i64, y: i64) -> PResult<i64> {
    let r = match op {
        "add" => x.checked_add(y),
        "subtract" => x.checked_sub(y),
        "multiply" => x.checked_mul(y),
        "divide" => x.checked_div(y),
        "floor_divide" => x.checked_div(y).map(|q| {
            if (x % y != 0) && ((x < 0) != (y < 0)) {
                q - 1
            } else {
                q
            }
        }),
        "power" => match u32::try_from(y) {
            Ok(e) => x.checked_pow(e),
            Err(_) => None,
        },
        "maximum" => Some(x.max(y)),
        "minimum" => Some(x.min(y)),
        "equal" => Some((x == y) as i64),
        "not_equal" => Some((x != y) as i64),
        "less" => Some((x < y) as i64),
        "less_equal" => Some((x <= y) as i64),
        "greater" => Some((x > y) as i64),
        "greater_equal" => Some((x >= y) as i64),
        _ => None,
    };
    match r {
        Some(v) => Ok(v),
        None => bail!("integer '{op}' of {x} and {y} overflows or divides by zero"),
    }
}

fn float_binary(op: &str, x: f64, y: f64) -> f64 {
    match op {
        "add" => x + y,
        "subtract" => x - y,
        "multiply" => x * y,
        "divide" => x / y,
        "floor_divide" => (x / y).floor(),
        "power" => x.powf(y),
        "maximum" => x.max(y),
        _ => x.min(y),
    }
}

fn float_compare(op: &str, x: f64, y: f64) -> i64 {
    (match op {
        "equal" => x == y,
        "not_equal" => x != y,
        "less" => x < y,
        "less_equal" => x <= y,
        "greater" => x > y,
        _ => x >= y,
    }) as i64
}

fn unary(op: &str, t: &Tensor) -> PResult<Option<Tensor>> {
    let data = match &t.data {
        Data::Int(v) => {
            let f: fn(i64) -> Option<i64> = match op {
                "negative" => i64::checked_neg,
                "abs" => i64::checked_abs,
                "nn.relu" => |x: i64| Some(x.max(0)),
                _ => return Ok(None),
            };
            let mut out = Vec::with_capacity(v.len());
            for &x in v {
                match f(x) {
                    Some(y) => out.push(wrap_int(t.dtype, y)),
                    None => bail!("integer '{op}' of {x} overflows"),
                }
            }
            Data::Int(out)
        }
        Data::Float(v) => {
            let f: fn(f64) -> f64 = match op {
                "negative" => |x| -x,
                "abs" => f64::abs,
                "sqrt" => f64::sqrt,
                "rsqrt" => |x| 1.0 / x.sqrt(),
                "exp" => f64::exp,
                "log" => f64::ln,
                "floor" => f64::floor,
                "ceil" => f64::ceil,
                "round" => f64::round_ties_even,
                "sigmoid" => |x| 1.0 / (1.0 + (-x).exp()),
                "tanh" => f64::tanh,
                "sin" => f64::sin,
                "cos" => f64::cos,
                "nn.relu" => |x| x.max(0.0),
                _ => return Ok(None),
            };
            Data::Float(v.iter().map(|x| round_to(t.dtype, f(*x))).collect())
        }
    };
    Ok(Some(Tensor::new(t.dtype, t.shape.clone(), data)))
}

pub(crate) fn astype(t: &Tensor, dtype: DType) -> Tensor {
    let data = match (&t.data, dtype.is_float()) {
        (Data::Int(v), true) => Data::Float(v.iter().map(|x| round_to(dtype, *x as f64)).collect()),
        (Data::Int(v), false) => Data::Int(v.iter().map(|x| wrap_int(dtype, *x)).collect()),
        (Data::Float(v), true) => Data::Float(v.iter().map(|x| round_to(dtype, *x)).collect()),
        (Data::Float(v), false) if dtype == DType::Bool => {
            Data::Int(v.iter().map(|x| (*x != 0.0) as i64).collect())
        }
        (Data::Float(v), false) => {
            Data::Int(v.iter().map(|x| wrap_int(dtype, *x as i64)).collect())
        }
    };
    Tensor::new(dtype, t.shape.clone(), data)
}

/// Reshape to `shape`, where one extent may be -1 (inferred).
pub(crate) fn reshape(t: &Tensor, shape: &[i64]) -> PResult<Tensor> {
    let shape = resolve_reshape(&t.shape, shape)?;
    Ok(Tensor::new(t.dtype, shape, t.data.clone()))
}

/// The target shape of a reshape of `from` to `to`, with at most one -1 extent inferred.
pub(crate) fn resolve_reshape(from: &[i64], to: &[i64]) -> PResult<Vec<i64>> {
    let n = num_elements(from)?;
    let mut known: usize = 1;
    let mut infer = None;
    for (i, &d) in to.iter().enumerate() {
        if d == -1 {
            if infer.replace(i).is_some() {
                bail!("reshape target {to:?} has more than one -1");
            }
        } else {
            let Ok(d) = usize::try_from(d) else {
                bail!("reshape target {to:?} is invalid")
            };
            known = match known.checked_mul(d) {
                Some(k) => k,
                None => bail!("reshape target {to:?} has too many elements"),
            };
        }
    }
    let mut out = to.to_vec();
    if let Some(i) = infer {
        if known == 0 || n % known != 0 {
            bail!("cannot reshape {from:?} to {to:?}");
        }
        out[i] = (n / known) as i64;
    } else if known != n {
        bail!("cannot reshape {from:?} ({n} elements) to {to:?} ({known} elements)");
    }
    num_elements(&out)?;
    Ok(out)
}

fn permute(t: &Tensor, axes: Option<Vec<i64>>, max_elements: usize) -> PResult<Option<Tensor>> {
    let rank = t.shape.len();
    let axes: Vec<usize> = match axes {
        Some(a) => {
            if a.len() != rank {
                bail!("permutation {a:?} does not match rank {rank}");
            }
            let mut seen = vec![false; rank];
            let mut out = Vec::with_capacity(rank);
            for x in a {
                let ax = norm_axis(x, rank)?;
                if std::mem::replace(&mut seen[ax], true) {
                    bail!("permutation repeats axis {x}");
                }
                out.push(ax);
            }
            out
        }
        None => (0..rank).rev().collect(),
    };
    if t.len() > max_elements {
        return Ok(None);
    }
    let shape: Vec<i64> = axes.iter().map(|&a| t.shape[a]).collect();
    let in_strides = strides(&t.shape);
    let n = t.len();
    let mut idx = vec![0usize; rank];
    let mut map = Vec::with_capacity(n);
    for _ in 0..n {
        map.push(
            idx.iter()
                .zip(&axes)
                .map(|(&i, &a)| i * in_strides[a])
                .sum(),
        );
        for k in (0..rank).rev() {
            idx[k] += 1;
            if (idx[k] as i64) < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(Some(Tensor::new(t.dtype, shape, gather(&t.data, &map))))
}

/// Relax `expand_dims`: `axes` are positions in the output.
fn expand_dims(t: &Tensor, axes: &[i64]) -> PResult<Tensor> {
    let out_rank = t.shape.len() + axes.len();
    let mut is_new = vec![false; out_rank];
    for &a in axes {
        let ax = norm_axis(a, out_rank)?;
        if std::mem::replace(&mut is_new[ax], true) {
            bail!("expand_dims repeats axis {a}");
        }
    }
    let mut dims = t.shape.iter();
    let shape = is_new
        .iter()
        .map(|&n| if n { 1 } else { *dims.next().unwrap_or(&1) })
        .collect();
    Ok(Tensor::new(t.dtype, shape, t.data.clone()))
}

fn squeeze(t: &Tensor, axes: Option<&[i64]>) -> PResult<Tensor> {
    let rank = t.shape.len();
    let mut drop = vec![false; rank];
    match axes {
        Some(axes) => {
            for &a in axes {
                let ax = norm_axis(a, rank)?;
                if t.shape[ax] != 1 {
                    bail!("cannot squeeze axis {a} of extent {}", t.shape[ax]);
                }
                drop[ax] = true;
            }
        }
        None => {
            for (d, s) in drop.iter_mut().zip(&t.shape) {
                *d = *s == 1;
            }
        }
    }
    let shape = t
        .shape
        .iter()
        .zip(&drop)
        .filter(|(_, d)| !**d)
        .map(|(s, _)| *s)
        .collect();
    Ok(Tensor::new(t.dtype, shape, t.data.clone()))
}

fn concat(inputs: &[&Tensor], axis: i64, max_elements: usize) -> PResult<Option<Tensor>> {
    let Some(first) = inputs.first() else {
        bail!("concat needs at least one operand")
    };
    let rank = first.shape.len();
    let ax = norm_axis(axis, rank)?;
    let mut extent: i64 = 0;
    for t in inputs {
        if t.dtype != first.dtype || t.shape.len() != rank {
            bail!("concat operands differ in dtype or rank");
        }
        for k in 0..rank {
            if k != ax && t.shape[k] != first.shape[k] {
                bail!(
                    "concat operands {:?} and {:?} differ off axis {axis}",
                    first.shape,
                    t.shape
                );
            }
        }
        extent = match extent.checked_add(t.shape[ax]) {
            Some(e) => e,
            None => bail!("concat result is too large"),
        };
    }
    let mut shape = first.shape.clone();
    shape[ax] = extent;
    if too_big(&shape, max_elements)? {
        return Ok(None);
    }
    let outer: usize = first.shape[..ax].iter().map(|d| *d as usize).product();
    let inner: usize = first.shape[ax + 1..].iter().map(|d| *d as usize).product();
    let mut data = match first.data {
        Data::Int(_) => Data::Int(Vec::new()),
        Data::Float(_) => Data::Float(Vec::new()),
    };
    for o in 0..outer {
        for t in inputs {
            let chunk = t.shape[ax] as usize * inner;
            match (&mut data, &t.data) {
                (Data::Int(d), Data::Int(s)) => d.extend_from_slice(&s[o * chunk..(o + 1) * chunk]),
                (Data::Float(d), Data::Float(s)) => {
                    d.extend_from_slice(&s[o * chunk..(o + 1) * chunk])
                }
                _ => bail!("concat operands differ in dtype"),
            }
        }
    }
    Ok(Some(Tensor::new(first.dtype, shape, data)))
}

/// Relax/numpy slice bounds of one axis: the first index and the number of elements taken.
pub(crate) fn slice_range(dim: i64, begin: i64, end: i64, step: i64) -> PResult<(i64, i64)> {
    if step == 0 {
        bail!("slice step must not be 0");
    }
    let norm = |v: i64, lo: i64, hi: i64| -> i64 {
        let v = if v < 0 { v.saturating_add(dim) } else { v };
        v.clamp(lo, hi)
    };
    let (b, e) = if step > 0 {
        (norm(begin, 0, dim), norm(end, 0, dim))
    } else {
        (norm(begin, -1, dim - 1), norm(end, -1, dim - 1))
    };
    let span = if step > 0 { e - b } else { b - e };
    let mag = step.unsigned_abs() as i64;
    let count = if span <= 0 { 0 } else { (span - 1) / mag + 1 };
    Ok((b, count))
}

fn strided_slice(t: &Tensor, attrs: &Attrs, max_elements: usize) -> PResult<Option<Tensor>> {
    let axes = ints_attr(attrs, "axes")?;
    let begin = ints_attr(attrs, "begin")?;
    let end = ints_attr(attrs, "end")?;
    let steps = match attrs.get("strides") {
        Some(s) => match s.as_ints() {
            Some(v) => v,
            None => bail!("attribute 'strides' must be a list of ints"),
        },
        None => vec![1; axes.len()],
    };
    if begin.len() != axes.len() || end.len() != axes.len() || steps.len() != axes.len() {
        bail!("strided_slice axes, begin, end and strides differ in length");
    }
    let rank = t.shape.len();
    let mut first = vec![0i64; rank];
    let mut step = vec![1i64; rank];
    let mut shape = t.shape.clone();
    for i in 0..axes.len() {
        let ax = norm_axis(axes[i], rank)?;
        let (b, count) = slice_range(t.shape[ax], begin[i], end[i], steps[i])?;
        first[ax] = b;
        step[ax] = steps[i];
        shape[ax] = count;
    }
    if too_big(&shape, max_elements)? {
        return Ok(None);
    }
    let in_strides = strides(&t.shape);
    let n = num_elements(&shape)?;
    let mut idx = vec![0i64; rank];
    let mut map = Vec::with_capacity(n);
    for _ in 0..n {
        let mut src = 0usize;
        for k in 0..rank {
            src += (first[k] + idx[k] * step[k]) as usize * in_strides[k];
        }
        map.push(src);
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(Some(Tensor::new(t.dtype, shape, gather(&t.data, &map))))
}

fn take(t: &Tensor, idx: &Tensor, axis: i64, max_elements: usize) -> PResult<Option<Tensor>> {
    let Data::Int(indices) = &idx.data else {
        bail!("take indices must be integers")
    };
    let ax = norm_axis(axis, t.shape.len())?;
    let mut shape = t.shape[..ax].to_vec();
    shape.extend_from_slice(&idx.shape);
    shape.extend_from_slice(&t.shape[ax + 1..]);
    if too_big(&shape, max_elements)? {
        return Ok(None);
    }
    let dim = t.shape[ax];
    let outer: usize = t.shape[..ax].iter().map(|d| *d as usize).product();
    let inner: usize = t.shape[ax + 1..].iter().map(|d| *d as usize).product();
    let mut map = Vec::with_capacity(outer * indices.len() * inner);
    for o in 0..outer {
        for &i in indices {
            if !(0..dim).contains(&i) {
                bail!("index {i} is out of range for extent {dim}");
            }
            let base = (o * dim as usize + i as usize) * inner;
            map.extend(base..base + inner);
        }
    }
    Ok(Some(Tensor::new(t.dtype, shape, gather(&t.data, &map))))
}

fn broadcast_to(t: &Tensor, shape: &[i64], max_elements: usize) -> PResult<Option<Tensor>> {
    let out = broadcast_shape(&t.shape, shape)?;
    if out != shape {
        bail!("cannot broadcast {:?} to {shape:?}", t.shape);
    }
    if too_big(&out, max_elements)? {
        return Ok(None);
    }
    let map = broadcast_map(&t.shape, &out);
    Ok(Some(Tensor::new(t.dtype, out, gather(&t.data, &map))))
}

fn where_(c: &Tensor, x: &Tensor, y: &Tensor, max_elements: usize) -> PResult<Option<Tensor>> {
    if x.dtype != y.dtype {
        bail!(
            "where branches differ in dtype: {} and {}",
            x.dtype,
            y.dtype
        );
    }
    let Data::Int(cond) = &c.data else {
        bail!("where condition must be bool")
    };
    let shape = broadcast_shape(&broadcast_shape(&c.shape, &x.shape)?, &y.shape)?;
    if too_big(&shape, max_elements)? {
        return Ok(None);
    }
    let (mc, mx, my) = (
        broadcast_map(&c.shape, &shape),
        broadcast_map(&x.shape, &shape),
        broadcast_map(&y.shape, &shape),
    );
    let data = match (&x.data, &y.data) {
        (Data::Int(a), Data::Int(b)) => Data::Int(
            (0..mc.len())
                .map(|k| if cond[mc[k]] != 0 { a[mx[k]] } else { b[my[k]] })
                .collect(),
        ),
        (Data::Float(a), Data::Float(b)) => Data::Float(
            (0..mc.len())
                .map(|k| if cond[mc[k]] != 0 { a[mx[k]] } else { b[my[k]] })
                .collect(),
        ),
        _ => bail!("where branches differ in dtype"),
    };
    Ok(Some(Tensor::new(x.dtype, shape, data)))
}

fn reduce(op: &str, t: &Tensor, attrs: &Attrs) -> PResult<Option<Tensor>> {
    let rank = t.shape.len();
    let keepdims = attrs
        .get("keepdims")
        .and_then(Attr::as_bool)
        .unwrap_or(false);
    let mut reduced = vec![false; rank];
    match attrs.get("axis") {
        None => reduced.iter_mut().for_each(|r| *r = true),
        Some(_) => {
            for a in axes_attr(attrs, "axis")? {
                reduced[norm_axis(a, rank)?] = true;
            }
        }
    }
    if op == "mean" && matches!(t.data, Data::Int(_)) {
        return Ok(None);
    }
    let mut out_shape = Vec::new();
    let mut kept_shape = Vec::new();
    for (&r, &d) in reduced.iter().zip(&t.shape) {
        if r {
            if keepdims {
                out_shape.push(1);
            }
            kept_shape.push(1);
        } else {
            out_shape.push(d);
            kept_shape.push(d);
        }
    }
    let n_out = num_elements(&kept_shape)?;
    let n_in = t.len();
    if (op == "max" || op == "min") && n_in == 0 {
        bail!("'{op}' of an empty tensor");
    }
    // Each input element goes to the output element at its kept coordinates.
    let out_strides = strides(&kept_shape);
    let mut idx = vec![0i64; rank];
    let mut dest = Vec::with_capacity(n_in);
    for _ in 0..n_in {
        let mut d = 0usize;
        for k in 0..rank {
            if !reduced[k] {
                d += idx[k] as usize * out_strides[k];
            }
        }
        dest.push(d);
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < t.shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    let count = n_in.checked_div(n_out).unwrap_or(0);
    let data = match &t.data {
        Data::Float(v) => {
            let init = match op {
                "sum" | "mean" => 0.0,
                "prod" => 1.0,
                "max" => f64::NEG_INFINITY,
                _ => f64::INFINITY,
            };
            let mut acc = vec![init; n_out];
            for (x, &d) in v.iter().zip(&dest) {
                acc[d] = match op {
                    "sum" | "mean" => acc[d] + x,
                    "prod" => acc[d] * x,
                    "max" => acc[d].max(*x),
                    _ => acc[d].min(*x),
                };
            }
            if op == "mean" {
                acc.iter_mut().for_each(|a| *a /= count as f64);
            }
            Data::Float(acc.into_iter().map(|a| round_to(t.dtype, a)).collect())
        }
        Data::Int(v) => {
            let init = match op {
                "sum" => 0,
                "prod" => 1,
                "max" => i64::MIN,
                _ => i64::MAX,
            };
            let mut acc = vec![init; n_out];
            for (x, &d) in v.iter().zip(&dest) {
                let r = match op {
                    "sum" => acc[d].checked_add(*x),
                    "prod" => acc[d].checked_mul(*x),
                    "max" => Some(acc[d].max(*x)),
                    _ => Some(acc[d].min(*x)),
                };
                match r {
                    Some(r) => acc[d] = r,
                    None => bail!("integer '{op}' overflows"),
                }
            }
            Data::Int(acc.into_iter().map(|a| wrap_int(t.dtype, a)).collect())
        }
    };
    Ok(Some(Tensor::new(t.dtype, out_shape, data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i64s(shape: &[i64], v: &[i64]) -> Tensor {
        Tensor::ints(DType::I64, shape.to_vec(), v.to_vec())
    }

    fn f32s(shape: &[i64], v: &[f64]) -> Tensor {
        Tensor::new(DType::F32, shape.to_vec(), Data::Float(v.to_vec()))
    }

    fn attrs(kv: &[(&str, Attr)]) -> Attrs {
        kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn run(op: &str, inputs: &[&Tensor], a: &[(&str, Attr)]) -> Tensor {
        eval(op, inputs, &attrs(a), 1 << 20)
            .unwrap()
            .unwrap()
            .remove(0)
    }

    #[test]
    fn broadcasting_arithmetic() {
        let a = i64s(&[2, 1], &[1, 2]);
        let b = i64s(&[3], &[10, 20, 30]);
        let r = run("add", &[&a, &b], &[]);
        assert_eq!(r.shape, vec![2, 3]);
        assert_eq!(r.data, Data::Int(vec![11, 21, 31, 12, 22, 32]));
        let r = run(
            "floor_divide",
            &[&i64s(&[2], &[-7, 7]), &i64s(&[], &[2])],
            &[],
        );
        assert_eq!(r.data, Data::Int(vec![-4, 3]));
        let r = run("divide", &[&i64s(&[2], &[-7, 7]), &i64s(&[], &[2])], &[]);
        assert_eq!(r.data, Data::Int(vec![-3, 3]));
        let r = run("less", &[&f32s(&[2], &[1.0, 3.0]), &f32s(&[], &[2.0])], &[]);
        assert_eq!((r.dtype, r.data), (DType::Bool, Data::Int(vec![1, 0])));
    }

    #[test]
    fn integer_errors_are_reported_not_panics() {
        let zero = i64s(&[], &[0]);
        assert!(eval("divide", &[&i64s(&[], &[1]), &zero], &Attrs::new(), 16).is_err());
        let big = i64s(&[], &[i64::MAX]);
        assert!(eval("add", &[&big, &big], &Attrs::new(), 16).is_err());
        assert!(eval("power", &[&big, &i64s(&[], &[-1])], &Attrs::new(), 16).is_err());
        assert!(eval("negative", &[&i64s(&[], &[i64::MIN])], &Attrs::new(), 16).is_err());
        let f = f32s(&[1], &[1.0]);
        assert!(eval("add", &[&f, &big], &Attrs::new(), 16).is_err());
    }

    #[test]
    fn results_above_the_limit_are_not_folded() {
        let a = i64s(&[4], &[1, 2, 3, 4]);
        let b = i64s(&[4, 1], &[1, 2, 3, 4]);
        assert_eq!(eval("add", &[&a, &b], &Attrs::new(), 8).unwrap(), None);
        assert_eq!(
            eval("nn.conv2d", &[&a, &b], &Attrs::new(), 8).unwrap(),
            None
        );
    }

    #[test]
    fn layout_ops() {
        let t = i64s(&[2, 3], &[0, 1, 2, 3, 4, 5]);
        let r = run("permute_dims", &[&t], &[("axes", Attr::ints([1, 0]))]);
        assert_eq!(
            (r.shape.clone(), r.data),
            (vec![3, 2], Data::Int(vec![0, 3, 1, 4, 2, 5]))
        );
        let r = run("reshape", &[&t], &[("shape", Attr::ints([-1, 2]))]);
        assert_eq!(r.shape, vec![3, 2]);
        let r = run("expand_dims", &[&t], &[("axis", Attr::ints([0, 3]))]);
        assert_eq!(r.shape, vec![1, 2, 3, 1]);
        let r = run("squeeze", &[&r], &[]);
        assert_eq!(r.shape, vec![2, 3]);
        let r = run("concat", &[&t, &t], &[("axis", Attr::Int(1))]);
        assert_eq!(r.data, Data::Int(vec![0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5]));
        let r = run(
            "broadcast_to",
            &[&i64s(&[1], &[7])],
            &[("shape", Attr::ints([2, 2]))],
        );
        assert_eq!(r.data, Data::Int(vec![7; 4]));
        let bad = eval("reshape", &[&t], &attrs(&[("shape", Attr::ints([4]))]), 16);
        assert!(bad.is_err());
    }

    #[test]
    fn slicing_and_gathering() {
        let t = i64s(&[5], &[10, 11, 12, 13, 14]);
        let sl = |b: i64, e: i64, s: i64| {
            let a = [
                ("axes", Attr::ints([0])),
                ("begin", Attr::ints([b])),
                ("end", Attr::ints([e])),
                ("strides", Attr::ints([s])),
            ];
            run("strided_slice", &[&t], &a).data
        };
        assert_eq!(sl(1, 3, 1), Data::Int(vec![11, 12]));
        assert_eq!(sl(-2, i64::MAX, 1), Data::Int(vec![13, 14]));
        assert_eq!(sl(-1, i64::MIN, -2), Data::Int(vec![14, 12, 10]));
        assert_eq!(sl(3, 1, 1), Data::Int(vec![]));
        let idx = i64s(&[2], &[4, 0]);
        let r = run("take", &[&t, &idx], &[("axis", Attr::Int(0))]);
        assert_eq!(r.data, Data::Int(vec![14, 10]));
        let bad = i64s(&[], &[5]);
        assert!(eval("take", &[&t, &bad], &attrs(&[("axis", Attr::Int(0))]), 16).is_err());
    }

    #[test]
    fn reductions_and_casts() {
        let t = i64s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let r = run(
            "prod",
            &[&t],
            &[("axis", Attr::ints([1])), ("keepdims", Attr::Bool(true))],
        );
        assert_eq!(
            (r.shape.clone(), r.data),
            (vec![2, 1], Data::Int(vec![6, 120]))
        );
        let r = run("sum", &[&t], &[]);
        assert_eq!((r.shape.clone(), r.data), (vec![], Data::Int(vec![21])));
        let r = run(
            "astype",
            &[&f32s(&[2], &[2.7, -1.5])],
            &[("dtype", Attr::str("int64"))],
        );
        assert_eq!(r.data, Data::Int(vec![2, -1]));
        let r = run(
            "astype",
            &[&i64s(&[1], &[300])],
            &[("dtype", Attr::str("uint8"))],
        );
        assert_eq!(r.data, Data::Int(vec![44]));
        let r = run("sqrt", &[&f32s(&[1], &[2.0])], &[]);
        assert_eq!(r.data, Data::Float(vec![2f64.sqrt() as f32 as f64]));
    }
}
