//! Helpers for shape and dtype inference functions: typed attribute access with schema
//! defaults, broadcasting, axis normalization, data layouts and overflow-checked extent
//! arithmetic. Every helper returns a message instead of panicking, whatever the input.

use super::OpDef;
use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::ty::{Shape, TensorType};

/// What an inference function sees: the op's declaration, operand types and attributes.
/// Attribute getters fall back to the schema default.
pub struct InferCtx<'a> {
    pub def: &'static OpDef,
    pub operands: &'a [&'a TensorType],
    pub attrs: &'a Attrs,
}

/// What kind of value an attribute holds, for error messages.
fn kind_of(a: &Attr) -> &'static str {
    match a {
        Attr::Int(_) => "an int",
        Attr::Float(_) => "a float",
        Attr::Str(_) => "a string",
        Attr::Bool(_) => "a bool",
        Attr::List(_) => "a list",
        Attr::Dict(_) => "a dictionary",
    }
}

impl<'a> InferCtx<'a> {
    pub fn new(def: &'static OpDef, operands: &'a [&'a TensorType], attrs: &'a Attrs) -> Self {
        InferCtx { def, operands, attrs }
    }

    pub fn operand(&self, i: usize) -> &TensorType {
        self.operands[i]
    }

    /// The attribute, or its schema default.
    pub fn attr(&self, name: &str) -> Option<Attr> {
        find_attr(self.attrs, name)
            .cloned()
            .or_else(|| self.def.attr_spec(name).and_then(|s| s.default.value()))
    }

    /// The attribute converted by `conv`; `Ok(None)` when it is absent and has no default.
    /// Reads a given attribute in place: inference runs once per binding in the verifier.
    fn typed<T>(
        &self,
        name: &str,
        what: &str,
        conv: impl Fn(&Attr) -> Option<T>,
    ) -> Result<Option<T>, String> {
        let check = |a: &Attr| {
            conv(a)
                .map(Some)
                .ok_or_else(|| format!("attribute '{name}' must be {what}, got {}", kind_of(a)))
        };
        match find_attr(self.attrs, name) {
            Some(a) => check(a),
            None => match self.def.attr_spec(name).and_then(|s| s.default.value()) {
                Some(a) => check(&a),
                None => Ok(None),
            },
        }
    }

    fn required<T>(&self, name: &str, v: Result<Option<T>, String>) -> Result<T, String> {
        v?.ok_or_else(|| format!("missing required attribute '{name}'"))
    }

    pub fn int(&self, name: &str) -> Result<i64, String> {
        self.required(name, self.opt_int(name))
    }

    pub fn opt_int(&self, name: &str) -> Result<Option<i64>, String> {
        self.typed(name, "an int", Attr::as_int)
    }

    pub fn float(&self, name: &str) -> Result<f64, String> {
        self.required(name, self.typed(name, "a float", Attr::as_float))
    }

    pub fn string(&self, name: &str) -> Result<String, String> {
        self.required(name, self.opt_string(name))
    }

    pub fn opt_string(&self, name: &str) -> Result<Option<String>, String> {
        self.typed(name, "a string", |a| a.as_str().map(str::to_string))
    }

    pub fn bool(&self, name: &str) -> Result<bool, String> {
        self.required(name, self.typed(name, "a bool", Attr::as_bool))
    }

    pub fn ints(&self, name: &str) -> Result<Vec<i64>, String> {
        self.required(name, self.opt_ints(name))
    }

    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        self.typed(name, "a list of ints", Attr::as_ints)
    }

    pub fn floats(&self, name: &str) -> Result<Vec<f64>, String> {
        self.required(name, self.typed(name, "a list of floats", Attr::as_floats))
    }

    /// A dtype given by its TVM name (`"float16"`), as `astype` and `out_dtype` take it.
    pub fn dtype(&self, name: &str) -> Result<DType, String> {
        self.required(name, self.opt_dtype(name))
    }

    pub fn opt_dtype(&self, name: &str) -> Result<Option<DType>, String> {
        match self.opt_string(name)? {
            None => Ok(None),
            Some(s) => DType::from_tvm_name(&s).map(Some).ok_or_else(|| {
                format!("attribute '{name}': unknown dtype '{s}' (expected a TVM name such as \"float32\")")
            }),
        }
    }

    /// A string attribute that must be one of `allowed`.
    pub fn choice(&self, name: &str, allowed: &[&str]) -> Result<String, String> {
        let s = self.string(name)?;
        if allowed.contains(&s.as_str()) {
            Ok(s)
        } else {
            Err(format!("attribute '{name}' must be one of {allowed:?}, got \"{s}\""))
        }
    }

    /// A list of ints of length `n`, where a single-element list is broadcast to `n`.
    pub fn ints_n(&self, name: &str, n: usize) -> Result<Vec<i64>, String> {
        let v = self.ints(name)?;
        match v.len() {
            l if l == n => Ok(v),
            1 => Ok(vec![v[0]; n]),
            l => Err(format!("attribute '{name}' must have 1 or {n} elements, got {l}")),
        }
    }

    /// A pair of strictly positive ints (strides, dilation, kernel sizes); one element means
    /// both.
    pub fn positive_pair(&self, name: &str) -> Result<[i64; 2], String> {
        let v = self.ints_n(name, 2)?;
        if let Some(x) = v.iter().find(|&&x| x <= 0) {
            return Err(format!("attribute '{name}' must be positive, got {x} in {v:?}"));
        }
        Ok([v[0], v[1]])
    }

    /// 2-D padding as `[top, left, bottom, right]`, from 1 element (all sides), 2 elements
    /// (`[top/bottom, left/right]`) or 4 elements; negative padding is rejected.
    pub fn padding_2d(&self, name: &str) -> Result<[i64; 4], String> {
        let v = self.ints(name)?;
        let p = match v[..] {
            [a] => [a, a, a, a],
            [h, w] => [h, w, h, w],
            [t, l, b, r] => [t, l, b, r],
            _ => {
                return Err(format!(
                    "attribute '{name}' must have 1, 2 or 4 elements, got {}",
                    v.len()
                ))
            }
        };
        if let Some(x) = p.iter().find(|&&x| x < 0) {
            return Err(format!("attribute '{name}' must not be negative, got {x} in {v:?}"));
        }
        Ok(p)
    }
}

/// Looks an attribute up by a linear scan: attribute dictionaries hold a handful of entries,
/// for which comparing names is cheaper than hashing one.
pub(crate) fn find_attr<'a>(attrs: &'a Attrs, name: &str) -> Option<&'a Attr> {
    attrs.iter().find_map(|(k, v)| (k == name).then_some(v))
}

/// Numpy-style broadcast of two shapes.
pub fn broadcast_shapes(a: &[i64], b: &[i64]) -> Result<Shape, String> {
    let rank = a.len().max(b.len());
    let mut out = Shape::with_capacity(rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            (x, y) => return Err(format!("shapes {a:?} and {b:?} do not broadcast ({x} vs {y})")),
        });
    }
    Ok(out)
}

/// Normalizes a possibly negative axis against `rank`: valid axes are `-rank..rank`, so a
/// scalar has none.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis.checked_add(r) } else { Some(axis) };
    match a {
        Some(a) if (0..r).contains(&a) => Ok(a as usize),
        _ => Err(format!("axis {axis} is out of range for rank {rank}")),
    }
}

/// Normalizes a list of axes against `rank` and rejects repeated axes. Keeps the given order.
pub fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, rank)?;
        if std::mem::replace(&mut seen[n], true) {
            return Err(format!("axis {a} is repeated in {axes:?}"));
        }
        out.push(n);
    }
    Ok(out)
}

/// The number of elements of a shape, or an error on overflow.
pub fn num_elements(shape: &[i64]) -> Result<i64, String> {
    shape
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("the element count of shape {shape:?} overflows"))
}

/// An extent computed in `i128` (so that sums and products of two `i64`s cannot overflow)
/// back to `i64`, or an error naming what was computed.
pub fn extent(v: i128, what: &str) -> Result<i64, String> {
    i64::try_from(v).map_err(|_| format!("{what} overflows ({v})"))
}

/// The two operands must have the same dtype; returns it.
pub fn same_dtype(a: &TensorType, b: &TensorType) -> Result<DType, String> {
    if a.dtype != b.dtype {
        return Err(format!("operand dtypes differ: {} and {}", a.dtype, b.dtype));
    }
    Ok(a.dtype)
}

pub fn require_float(t: &TensorType, what: &str) -> Result<(), String> {
    if !t.dtype.is_float() {
        return Err(format!("{what} must have a float dtype, got {}", t.dtype));
    }
    Ok(())
}

pub fn require_rank(t: &TensorType, rank: usize, what: &str) -> Result<(), String> {
    if t.rank() != rank {
        return Err(format!("{what} must have rank {rank}, got {t}"));
    }
    Ok(())
}

/// A 4-D data layout such as `NCHW`/`NHWC` or kernel layout such as `OIHW`/`HWIO`: a
/// permutation of the letters of a canonical layout. `pos[i]` is where the canonical dim `i`
/// sits in a tensor of this layout.
#[derive(Clone, Copy, Debug)]
pub struct Layout4 {
    pos: [usize; 4],
}

impl Layout4 {
    /// Parses `layout` as a permutation of `canonical` (e.g. `NHWC` of `NCHW`); `attr` names the
    /// attribute in messages.
    pub fn parse(layout: &str, canonical: &str, attr: &str) -> Result<Layout4, String> {
        let bad = || {
            format!("attribute '{attr}': layout \"{layout}\" is not a permutation of {canonical}")
        };
        if layout.len() != 4 || !layout.is_ascii() {
            return Err(bad());
        }
        let mut pos = [0usize; 4];
        for (i, c) in canonical.bytes().enumerate() {
            pos[i] = layout.bytes().position(|l| l == c).ok_or_else(bad)?;
        }
        Ok(Layout4 { pos })
    }

    /// The shape of a tensor of this layout, reordered into the canonical layout.
    pub fn to_canonical(self, t: &TensorType, what: &str) -> Result<[i64; 4], String> {
        require_rank(t, 4, what)?;
        Ok(self.pos.map(|p| t.shape[p]))
    }

    /// A canonical-order shape laid out in this layout.
    pub fn shape_of(self, canonical: [i64; 4]) -> Shape {
        let mut out = Shape::from_slice(&[0; 4]);
        for (i, &p) in self.pos.iter().enumerate() {
            out[p] = canonical[i];
        }
        out
    }
}

/// The output extent of a sliding window (convolution, pooling) along one axis:
/// `floor((input + pads - dilation * (kernel - 1) - 1) / stride) + 1`. With `ceil_mode` the
/// division rounds up, but a last window that would start inside the right padding only is
/// dropped (TVM's and PyTorch's rule). Strides, dilation and kernel must be positive and pads
/// non-negative (the callers check them).
#[allow(clippy::too_many_arguments)]
pub fn window_out(
    input: i64,
    pad_before: i64,
    pad_after: i64,
    kernel: i64,
    stride: i64,
    dilation: i64,
    ceil_mode: bool,
    what: &str,
) -> Result<i64, String> {
    let (input, pb, pa) = (input as i128, pad_before as i128, pad_after as i128);
    let (k, s, d) = (kernel as i128, stride as i128, dilation as i128);
    let padded = input + pb + pa;
    let window = d * (k - 1) + 1;
    let numerator = padded - window;
    if numerator < 0 {
        return Err(format!(
            "{what}: the window (kernel {kernel}, dilation {dilation}: extent {window}) is larger than the padded input ({padded})"
        ));
    }
    let out = if ceil_mode {
        let raw = (numerator + s - 1) / s + 1;
        if (raw - 1) * s >= input + pb {
            raw - 1
        } else {
            raw
        }
    } else {
        numerator / s + 1
    };
    extent(out, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_normalize_and_reject_repeats_and_range() {
        assert_eq!(norm_axis(-1, 4), Ok(3));
        assert_eq!(norm_axis(0, 4), Ok(0));
        assert!(norm_axis(4, 4).is_err());
        assert!(norm_axis(-5, 4).is_err());
        assert!(norm_axis(0, 0).is_err(), "a scalar has no axis");
        assert!(norm_axis(i64::MIN, 3).is_err());
        assert_eq!(norm_axes(&[-1, 0], 3), Ok(vec![2, 0]));
        assert!(norm_axes(&[1, -2], 3).unwrap_err().contains("repeated"));
    }

    #[test]
    fn layouts_are_permutations() {
        let nhwc = Layout4::parse("NHWC", "NCHW", "data_layout").unwrap();
        let t = TensorType::new(DType::F32, [1, 224, 224, 3]);
        assert_eq!(nhwc.to_canonical(&t, "data").unwrap(), [1, 3, 224, 224]);
        assert_eq!(nhwc.shape_of([1, 64, 112, 112]).as_slice(), &[1, 112, 112, 64]);
        let hwio = Layout4::parse("HWIO", "OIHW", "kernel_layout").unwrap();
        let w = TensorType::new(DType::F32, [7, 7, 3, 64]);
        assert_eq!(hwio.to_canonical(&w, "weight").unwrap(), [64, 3, 7, 7]);
        assert!(Layout4::parse("NCHW8c", "NCHW", "data_layout").is_err());
        assert!(Layout4::parse("NCHH", "NCHW", "data_layout").is_err());
        assert!(Layout4::parse("ÑCH", "NCHW", "data_layout").is_err());
    }

    #[test]
    fn window_sizes_follow_floor_and_ceil_rules() {
        // ResNet stem: 224, pad 3+3, kernel 7, stride 2 -> 112.
        assert_eq!(window_out(224, 3, 3, 7, 2, 1, false, "h"), Ok(112));
        // ResNet max pool: 112, pad 1+1, kernel 3, stride 2 -> 56.
        assert_eq!(window_out(112, 1, 1, 3, 2, 1, false, "h"), Ok(56));
        // ceil_mode: 6, kernel 3, stride 2 -> floor 2, ceil 3 (last window starts at 4 < 6).
        assert_eq!(window_out(6, 0, 0, 3, 2, 1, false, "h"), Ok(2));
        assert_eq!(window_out(6, 0, 0, 3, 2, 1, true, "h"), Ok(3));
        // ceil_mode drops a window that would start in the right padding only:
        // 5, pad 1+1, kernel 2, stride 2: raw ceil = 4, but window 3 starts at 6 >= 5 + 1.
        assert_eq!(window_out(5, 1, 1, 2, 2, 1, true, "h"), Ok(3));
        assert!(window_out(2, 0, 0, 3, 1, 1, false, "h").is_err());
        assert!(window_out(i64::MAX, i64::MAX, i64::MAX, 1, 1, 1, false, "h")
            .unwrap_err()
            .contains("overflows"));
        assert!(window_out(10, 0, 0, i64::MAX, 1, i64::MAX, false, "h").is_err());
    }

    #[test]
    fn element_count_overflow_is_an_error() {
        assert_eq!(num_elements(&[2, 3, 4]), Ok(24));
        assert_eq!(num_elements(&[]), Ok(1));
        assert!(num_elements(&[i64::MAX, 2]).is_err());
    }
}
