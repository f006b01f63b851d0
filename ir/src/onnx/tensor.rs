//! Constant tensors: decoded from ONNX `TensorProto`s, computed by the constant evaluator
//! ([`super::eval`]) and written into the IR as `constant` bindings.
//!
//! Values are held widened: every integer and bool dtype as `i64` (bools as 0/1; `uint64`
//! values above `i64::MAX` wrap), every float dtype as `f64` rounded to the dtype's precision.
//! That is enough for the shape computations and small constants the frontend folds, and keeps
//! the evaluator to two element kinds.

use super::error::{bail, PResult};
use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::ty::TensorType;
use onnx_protobuf::tensor_proto::{DataLocation, DataType};
use onnx_protobuf::TensorProto;
use protobuf::Enum;

/// Element storage, widened (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Data {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl Data {
    pub fn len(&self) -> usize {
        match self {
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
        }
    }
}

/// A constant tensor with a static shape.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tensor {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub data: Data,
}

impl Tensor {
    /// A tensor of `dtype`; integer data for integer and bool dtypes, float data otherwise.
    /// The caller guarantees that `data` has as many elements as `shape` says.
    pub fn new(dtype: DType, shape: Vec<i64>, data: Data) -> Tensor {
        debug_assert_eq!(Some(data.len()), num_elements(&shape).ok());
        Tensor { dtype, shape, data }
    }

    pub fn ints(dtype: DType, shape: Vec<i64>, v: Vec<i64>) -> Tensor {
        Tensor::new(dtype, shape, Data::Int(v))
    }

    /// A 1-D int64 tensor.
    pub fn i64_vector(v: Vec<i64>) -> Tensor {
        let n = v.len() as i64;
        Tensor::ints(DType::I64, vec![n], v)
    }

    pub fn scalar_f(dtype: DType, v: f64) -> Tensor {
        Tensor::new(dtype, Vec::new(), Data::Float(vec![round_to(dtype, v)]))
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.shape.iter().copied())
    }

    /// The elements as integers (floats truncated toward zero), for shape-like uses.
    pub fn to_i64s(&self) -> Vec<i64> {
        match &self.data {
            Data::Int(v) => v.clone(),
            Data::Float(v) => v.iter().map(|x| *x as i64).collect(),
        }
    }

    /// The elements as floats.
    pub fn to_f64s(&self) -> Vec<f64> {
        match &self.data {
            Data::Int(v) => v.iter().map(|x| *x as f64).collect(),
            Data::Float(v) => v.clone(),
        }
    }

    /// Attributes of the IR `constant` op holding this tensor.
    pub fn constant_attrs(&self) -> Attrs {
        // The `constant` op keeps every value in one numeric list (bools as 0/1).
        let value = match &self.data {
            Data::Int(v) => Attr::ints(v.iter().copied()),
            Data::Float(v) => Attr::floats(v.iter().copied()),
        };
        let mut attrs = Attrs::new();
        attrs.insert("value".into(), value);
        attrs.insert("shape".into(), Attr::ints(self.shape.iter().copied()));
        attrs.insert("dtype".into(), Attr::Str(self.dtype.tvm_name().into()));
        attrs
    }
}

/// The highest rank the frontend accepts; far above any real model, low enough that a shape
/// read from a (possibly hostile) file cannot blow up memory.
pub(crate) const MAX_RANK: usize = 32;

/// The largest extent of one dimension the frontend accepts (2^31), for the same reason.
pub(crate) const MAX_DIM: i64 = 1 << 31;

/// Number of elements of a shape, failing on a rank above [`MAX_RANK`], negative extents,
/// extents above [`MAX_DIM`], and a product of the non-zero extents above `i64::MAX`: bounding
/// that product (not just the element count, which a 0 extent makes 0) keeps every stride and
/// partial product of an accepted shape from overflowing.
pub(crate) fn num_elements(shape: &[i64]) -> PResult<usize> {
    if shape.len() > MAX_RANK {
        bail!(
            "rank {} is above the supported maximum of {MAX_RANK}",
            shape.len()
        );
    }
    let mut nonzero: i64 = 1;
    let mut empty = false;
    for &d in shape {
        if d < 0 {
            bail!("negative dimension {d} in shape {shape:?}");
        }
        if d > MAX_DIM {
            bail!("dimension {d} in shape {shape:?} is above the supported maximum of {MAX_DIM}");
        }
        if d == 0 {
            empty = true;
            continue;
        }
        let Some(m) = nonzero.checked_mul(d) else {
            bail!("shape {shape:?} has too many elements")
        };
        nonzero = m;
    }
    Ok(if empty { 0 } else { nonzero as usize })
}

/// Rounds a value to what `dtype` can hold: floats to their precision, integers wrap to their
/// width (as a cast does), bools to 0/1.
pub(crate) fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16_bits_to_f64(f64_to_f16_bits(v)),
        DType::BF16 => bf16_bits_to_f64(f64_to_bf16_bits(v)),
        _ => v,
    }
}

/// Wraps an integer to the width of an integer dtype; bools become 0/1.
pub(crate) fn wrap_int(dtype: DType, v: i64) -> i64 {
    match dtype {
        DType::Bool => (v != 0) as i64,
        DType::I8 => v as i8 as i64,
        DType::I16 => v as i16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::U16 => v as u16 as i64,
        DType::U32 => v as u32 as i64,
        _ => v,
    }
}

/// The IR dtype of an ONNX `TensorProto.DataType` code.
pub(crate) fn dtype_of(code: i32) -> PResult<DType> {
    let Some(dt) = DataType::from_i32(code) else {
        bail!("unknown element type code {code}")
    };
    Ok(match dt {
        DataType::FLOAT => DType::F32,
        DataType::UINT8 => DType::U8,
        DataType::INT8 => DType::I8,
        DataType::UINT16 => DType::U16,
        DataType::INT16 => DType::I16,
        DataType::INT32 => DType::I32,
        DataType::INT64 => DType::I64,
        DataType::BOOL => DType::Bool,
        DataType::FLOAT16 => DType::F16,
        DataType::DOUBLE => DType::F64,
        DataType::UINT32 => DType::U32,
        DataType::UINT64 => DType::U64,
        DataType::BFLOAT16 => DType::BF16,
        other => bail!("element type {other:?} is not supported"),
    })
}

/// Shape and dtype of an initializer or `Constant` value without decoding its data, so that
/// big weights can become parameters without being read.
pub(crate) fn proto_type(t: &TensorProto) -> PResult<TensorType> {
    let dtype = dtype_of(t.data_type)?;
    num_elements(&t.dims)?;
    Ok(TensorType::new(dtype, t.dims.iter().copied()))
}

/// Decodes a `TensorProto`, refusing tensors with more than `max_elements` elements.
pub(crate) fn decode(t: &TensorProto, max_elements: usize) -> PResult<Tensor> {
    let dtype = dtype_of(t.data_type)?;
    let n = num_elements(&t.dims)?;
    if n > max_elements {
        bail!(
            "tensor of shape {:?} is too large to read as a constant ({n} elements)",
            t.dims
        );
    }
    if t.data_location.enum_value() == Ok(DataLocation::EXTERNAL) || !t.external_data.is_empty() {
        bail!("tensor data is stored in an external file, which is not supported");
    }
    let shape = t.dims.clone();
    if !t.raw_data.is_empty() {
        return decode_raw(dtype, shape, n, &t.raw_data);
    }
    let data = match dtype {
        DType::F32 => Data::Float(exact(n, &t.float_data)?.iter().map(|x| *x as f64).collect()),
        DType::F64 => Data::Float(exact(n, &t.double_data)?.to_vec()),
        DType::F16 => Data::Float(
            exact(n, &t.int32_data)?
                .iter()
                .map(|x| f16_bits_to_f64(*x as u16))
                .collect(),
        ),
        DType::BF16 => Data::Float(
            exact(n, &t.int32_data)?
                .iter()
                .map(|x| bf16_bits_to_f64(*x as u16))
                .collect(),
        ),
        DType::I64 => Data::Int(exact(n, &t.int64_data)?.to_vec()),
        DType::U32 | DType::U64 => Data::Int(
            exact(n, &t.uint64_data)?
                .iter()
                .map(|x| wrap_int(dtype, *x as i64))
                .collect(),
        ),
        DType::Bool | DType::I8 | DType::I16 | DType::I32 | DType::U8 | DType::U16 => Data::Int(
            exact(n, &t.int32_data)?
                .iter()
                .map(|x| wrap_int(dtype, *x as i64))
                .collect(),
        ),
    };
    Ok(Tensor::new(dtype, shape, data))
}

fn exact<T>(n: usize, v: &[T]) -> PResult<&[T]> {
    if v.len() != n {
        bail!("tensor data has {} elements, its shape says {n}", v.len());
    }
    Ok(v)
}

fn decode_raw(dtype: DType, shape: Vec<i64>, n: usize, raw: &[u8]) -> PResult<Tensor> {
    let width = (dtype.bits() / 8) as usize;
    if Some(raw.len()) != n.checked_mul(width) {
        bail!(
            "raw tensor data has {} bytes, shape {shape:?} of {dtype} needs {}",
            raw.len(),
            n * width
        );
    }
    let words = raw.chunks_exact(width).map(|c| {
        let mut b = [0u8; 8];
        b[..width].copy_from_slice(c);
        u64::from_le_bytes(b)
    });
    let data = match dtype {
        DType::F32 => Data::Float(words.map(|w| f32::from_bits(w as u32) as f64).collect()),
        DType::F64 => Data::Float(words.map(f64::from_bits).collect()),
        DType::F16 => Data::Float(words.map(|w| f16_bits_to_f64(w as u16)).collect()),
        DType::BF16 => Data::Float(words.map(|w| bf16_bits_to_f64(w as u16)).collect()),
        DType::I8 => Data::Int(words.map(|w| w as u8 as i8 as i64).collect()),
        DType::I16 => Data::Int(words.map(|w| w as u16 as i16 as i64).collect()),
        DType::I32 => Data::Int(words.map(|w| w as u32 as i32 as i64).collect()),
        DType::I64 | DType::U64 => Data::Int(words.map(|w| w as i64).collect()),
        DType::U8 | DType::U16 | DType::U32 => Data::Int(words.map(|w| w as i64).collect()),
        DType::Bool => Data::Int(words.map(|w| (w != 0) as i64).collect()),
    };
    Ok(Tensor::new(dtype, shape, data))
}

fn f16_bits_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// Rounds to nearest-even half precision (via f32, which is exact for the cases that matter
/// to constant folding).
fn f64_to_f16_bits(v: f64) -> u16 {
    let x = v as f32;
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    if x.is_nan() {
        return sign | 0x7e00;
    }
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mant = bits & 0x7f_ffff;
    if exp >= 31 {
        return sign | 0x7c00;
    }
    if exp <= 0 {
        if exp < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - exp) as u32;
        let half = 1u32 << (shift - 1);
        let rounded = (m + half - 1 + ((m >> shift) & 1)) >> shift;
        return sign | rounded as u16;
    }
    let rounded = mant + 0xfff + ((mant >> 13) & 1);
    let (exp, mant) = if rounded & 0x80_0000 != 0 {
        (exp + 1, 0)
    } else {
        (exp, rounded >> 13)
    };
    if exp >= 31 {
        return sign | 0x7c00;
    }
    sign | ((exp as u16) << 10) | mant as u16
}

fn bf16_bits_to_f64(h: u16) -> f64 {
    f32::from_bits((h as u32) << 16) as f64
}

fn f64_to_bf16_bits(v: f64) -> u16 {
    let x = v as f32;
    if x.is_nan() {
        return 0x7fc0;
    }
    let bits = x.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
    (rounded >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DataType, dims: &[i64]) -> TensorProto {
        let mut t = TensorProto::new();
        t.data_type = dtype as i32;
        t.dims = dims.to_vec();
        t
    }

    #[test]
    fn decodes_raw_little_endian_data() {
        let mut t = proto(DataType::INT64, &[2]);
        t.raw_data = [7i64.to_le_bytes(), (-3i64).to_le_bytes()].concat();
        assert_eq!(decode(&t, 16).unwrap().data, Data::Int(vec![7, -3]));
        let mut t = proto(DataType::FLOAT, &[1, 2]);
        t.raw_data = [1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat();
        let d = decode(&t, 16).unwrap();
        assert_eq!(d.shape, vec![1, 2]);
        assert_eq!(d.data, Data::Float(vec![1.5, -2.0]));
    }

    #[test]
    fn decodes_typed_fields() {
        let mut t = proto(DataType::INT32, &[3]);
        t.int32_data = vec![1, -2, 3];
        assert_eq!(decode(&t, 16).unwrap().data, Data::Int(vec![1, -2, 3]));
        let mut t = proto(DataType::FLOAT16, &[2]);
        t.int32_data = vec![0x3c00, 0xc000];
        assert_eq!(decode(&t, 16).unwrap().data, Data::Float(vec![1.0, -2.0]));
        let mut t = proto(DataType::BOOL, &[]);
        t.int32_data = vec![5];
        assert_eq!(decode(&t, 16).unwrap().data, Data::Int(vec![1]));
    }

    #[test]
    fn rejects_inconsistent_or_large_tensors() {
        let mut t = proto(DataType::FLOAT, &[3]);
        t.float_data = vec![1.0];
        assert!(decode(&t, 16).is_err());
        let mut t = proto(DataType::FLOAT, &[2]);
        t.raw_data = vec![0; 7];
        assert!(decode(&t, 16).is_err());
        assert!(decode(&proto(DataType::FLOAT, &[-1]), 16).is_err());
        assert!(decode(&proto(DataType::FLOAT, &[i64::MAX, i64::MAX]), 16).is_err());
        // A zero extent does not hide an overflowing product of the others.
        assert!(num_elements(&[0, 1 << 31, 1 << 31, 1 << 31]).is_err());
        assert_eq!(num_elements(&[0, 1 << 31, 1 << 31]).unwrap(), 0);
        assert!(decode(&proto(DataType::FLOAT, &[100]), 16).is_err());
        assert!(decode(&proto(DataType::STRING, &[1]), 16).is_err());
        let mut t = proto(DataType::FLOAT, &[1]);
        t.data_type = 999;
        assert!(decode(&t, 16).is_err());
    }

    #[test]
    fn half_precision_rounds_to_nearest_even() {
        for v in [0.0, 1.0, -2.5, 65504.0, 6.1e-5, 1.0e-7, 0.1] {
            let r = f16_bits_to_f64(f64_to_f16_bits(v));
            assert!((r - v).abs() <= v.abs() * 1e-3 + 6e-8, "{v} -> {r}");
        }
        assert_eq!(f64_to_f16_bits(1e6), 0x7c00);
        assert_eq!(round_to(DType::BF16, 1.0), 1.0);
    }
}
