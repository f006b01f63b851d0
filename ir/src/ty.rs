//! Tensor types: a static shape and an element type, printed `tensor<1x3x224x224xf32>`.

use crate::dtype::DType;
use smallvec::SmallVec;
use std::fmt;

/// The dimensions of a tensor. All extents are static and non-negative.
pub type Shape = SmallVec<[i64; 4]>;

/// A tensor type with a fully static shape. A rank-0 tensor (a scalar) prints `tensor<f32>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Shape,
    pub dtype: DType,
}

impl TensorType {
    pub fn new(dtype: DType, shape: impl IntoIterator<Item = i64>) -> Self {
        TensorType {
            shape: shape.into_iter().collect(),
            dtype,
        }
    }

    pub fn scalar(dtype: DType) -> Self {
        TensorType {
            shape: Shape::new(),
            dtype,
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar).
    pub fn num_elements(&self) -> i64 {
        self.shape.iter().product()
    }

    /// Size in bytes of a dense tensor of this type.
    pub fn size_bytes(&self) -> i64 {
        self.num_elements() * i64::from(self.dtype.bits() / 8)
    }

    pub fn with_shape(&self, shape: impl IntoIterator<Item = i64>) -> Self {
        TensorType::new(self.dtype, shape)
    }

    pub fn with_dtype(&self, dtype: DType) -> Self {
        TensorType {
            shape: self.shape.clone(),
            dtype,
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.dtype)
    }
}
