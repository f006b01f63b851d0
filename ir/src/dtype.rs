//! Element types of tensors, named as TVM names them (`float32`, `int64`, ...) and printed in
//! the short MLIR spelling inside tensor types (`f32`, `i64`, ...).

use std::fmt;
use std::str::FromStr;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

impl DType {
    /// Every dtype, in a fixed order (used by generators in tests).
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The short spelling used inside `tensor<...>` types: `f32`, `i64`, `i1` for bool.
    pub fn short_name(self) -> &'static str {
        match self {
            DType::Bool => "i1",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// TVM's name for the dtype (`float32`, `int64`, `bool`), used in attributes such as
    /// `astype {dtype = "float16"}` and by the TVM bridge.
    pub fn tvm_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parses the short spelling (`f32`).
    pub fn from_short_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.short_name() == s)
    }

    /// Parses TVM's spelling (`float32`).
    pub fn from_tvm_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.tvm_name() == s)
    }

    /// Size of one element in bits.
    pub fn bits(self) -> u32 {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 8,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 16,
            DType::I32 | DType::U32 | DType::F32 => 32,
            DType::I64 | DType::U64 | DType::F64 => 64,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

impl FromStr for DType {
    type Err = String;
    /// Accepts both spellings: `f32` and `float32`.
    fn from_str(s: &str) -> Result<Self, String> {
        DType::from_short_name(s)
            .or_else(|| DType::from_tvm_name(s))
            .ok_or_else(|| format!("unknown dtype '{s}'"))
    }
}
