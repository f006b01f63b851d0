//! TOSA ops into IR bindings, in MLIR's generic form as `torch-mlir-opt
//! --torch-backend-to-tosa-backend-pipeline --mlir-print-op-generic` writes them (TOSA 1.0:
//! zero points and shapes as operands, `!tosa.shape` values from `tosa.const_shape`).
//!
//! `tosa.conv2d` is `nn.conv2d` in `NHWC`/`OHWI` plus an `add` of its bias (left out when the
//! bias is a zero constant), `tosa.depthwise_conv2d` a grouped `nn.conv2d` on its
//! `[KH, KW, C, M]` weights reshaped to `HWIO` (`[KH, KW, 1, C*M]`), `tosa.matmul` `matmul`,
//! the pools `nn.max_pool2d`/`nn.avg_pool2d` in `NHWC` (TOSA's average leaves padding out of
//! the count), `tosa.clamp` `clip` (`nn.relu` for [0, max float]), `tosa.reduce_*` the
//! reduction with kept dimensions, `tosa.mul` `multiply` (shift 0), `tosa.reciprocal`
//! `divide(1, x)`, `tosa.slice` `strided_slice`, `tosa.pad` `nn.pad`; zero points must be 0
//! (float models).

use super::convert::{attrs, i64_array, result_type, Const, Cx, Val};
use super::{bail, PResult, Problem};
use crate::attr::{Attr, Attrs};
use crate::ty::TensorType;
use melior::ir::attribute::{DenseElementsAttribute, DenseI32ArrayAttribute};
use melior::ir::operation::OperationLike;
use melior::ir::OperationRef;
use std::rc::Rc;

impl<'f, 'c, 'a> Cx<'f, 'c, 'a> {
    pub(super) fn convert_tosa(
        &mut self,
        op: &OperationRef<'c, 'a>,
        short: &str,
    ) -> PResult<Vec<Val>> {
        let one = |v: PResult<Val>| v.map(|v| vec![v]);
        let elementwise1 = |relax: &str| -> Option<&'static str> {
            Some(match relax {
                "exp" => "exp",
                "log" => "log",
                "rsqrt" => "rsqrt",
                "tanh" => "tanh",
                "sigmoid" => "sigmoid",
                "abs" => "abs",
                "negate" => "negative",
                "floor" => "floor",
                "ceil" => "ceil",
                "erf" => "erf",
                _ => return None,
            })
        };
        if let Some(relax) = elementwise1(short) {
            let x = self.operand(op, 0)?;
            return one(self.unary(relax, x, op));
        }
        let binary = match short {
            "add" => Some("add"),
            "sub" => Some("subtract"),
            "maximum" => Some("maximum"),
            "minimum" => Some("minimum"),
            "pow" => Some("power"),
            "mul" => Some("multiply"),
            _ => None,
        };
        if let Some(relax) = binary {
            if short == "mul" && op.operand_count() == 3 {
                let shift = self.operand(op, 2)?;
                if !matches!(&shift, Val::Const(c) if c.splat() == Some(0.0)) {
                    bail!("a multiply with a non-zero shift is not supported");
                }
            }
            let (a, b) = (self.operand(op, 0)?, self.operand(op, 1)?);
            return one(self.binary(relax, a, b, op));
        }
        let out = result_type(op, 0);
        match short {
            "const" => one(super::convert::constant_named(op, "values")),
            "const_shape" => one(const_shape(op)),
            "reshape" => {
                let x = self.operand(op, 0)?;
                one(self.reshape(x, &out?))
            }
            "transpose" => {
                let x = self.operand(op, 0)?;
                let perms = i32_array(op, "perms")?;
                one(self.emit_vals("permute_dims", &[x], attrs(&[("axes", Attr::ints(perms))])))
            }
            "cast" => {
                let x = self.operand(op, 0)?;
                let ty = out?;
                let dtype = Attr::str(ty.dtype.tvm_name());
                one(self.elementwise("astype", &[x], attrs(&[("dtype", dtype)]), &ty))
            }
            "clamp" => {
                let x = self.operand(op, 0)?;
                let ty = out?;
                let (lo, hi) = (float_attr(op, "min_val")?, float_attr(op, "max_val")?);
                if lo == 0.0 && hi >= f32::MAX as f64 {
                    one(self.elementwise("nn.relu", &[x], Attrs::new(), &ty))
                } else {
                    let a = attrs(&[("min", Attr::Float(lo)), ("max", Attr::Float(hi))]);
                    one(self.elementwise("clip", &[x], a, &ty))
                }
            }
            "reciprocal" => {
                let x = self.operand(op, 0)?;
                let ty = out?;
                let one_ = Val::Const(Rc::new(Const {
                    ty: TensorType::scalar(ty.dtype),
                    values: Some(vec![1.0]),
                }));
                one(self.elementwise("divide", &[one_, x], Attrs::new(), &ty))
            }
            "reduce_sum" | "reduce_max" | "reduce_min" | "reduce_product" => {
                let relax = match short {
                    "reduce_sum" => "sum",
                    "reduce_max" => "max",
                    "reduce_min" => "min",
                    _ => "prod",
                };
                let x = self.operand(op, 0)?;
                let axis = super::convert::int_attr(op, "axis")?;
                let a = attrs(&[("axis", Attr::ints([axis])), ("keepdims", Attr::Bool(true))]);
                one(self.emit_vals(relax, &[x], a))
            }
            "concat" => {
                let ops = self.operands(op)?;
                let axis = super::convert::int_attr(op, "axis")?;
                one(self.emit_vals("concat", &ops, attrs(&[("axis", Attr::Int(axis))])))
            }
            "slice" => {
                let x = self.operand(op, 0)?;
                let start = self.shape_operand(op, 1)?;
                let size = self.shape_operand(op, 2)?;
                let end: Vec<i64> = start.iter().zip(&size).map(|(s, n)| s + n).collect();
                let a = attrs(&[
                    ("axes", Attr::ints(0..start.len() as i64)),
                    ("begin", Attr::ints(start)),
                    ("end", Attr::ints(end)),
                ]);
                one(self.emit_vals("strided_slice", &[x], a))
            }
            "pad" => {
                let x = self.operand(op, 0)?;
                let widths = self.shape_operand(op, 1)?;
                let value = match op.operand_count() {
                    3 => match self.operand(op, 2)? {
                        Val::Const(c) => c.splat(),
                        _ => None,
                    },
                    _ => Some(0.0),
                };
                let Some(value) = value else {
                    bail!("the padding value must be a constant");
                };
                let a = attrs(&[
                    ("pad_width", Attr::ints(widths)),
                    ("pad_value", Attr::Float(value)),
                ]);
                one(self.emit_vals("nn.pad", &[x], a))
            }
            "matmul" => {
                self.zero_points(op, 2)?;
                let (a, b) = (self.operand(op, 0)?, self.operand(op, 1)?);
                one(self.emit_vals("matmul", &[a, b], Attrs::new()))
            }
            "conv2d" | "depthwise_conv2d" => one(self.tosa_conv(op, short == "depthwise_conv2d")),
            "max_pool2d" | "avg_pool2d" => {
                if short == "avg_pool2d" {
                    self.zero_points(op, 1)?;
                }
                let x = self.operand(op, 0)?;
                let kernel = i64_array(op, "kernel")?;
                let stride = i64_array(op, "stride")?;
                let pad = tosa_pad(op)?;
                let mut a = attrs(&[
                    ("pool_size", Attr::ints(kernel)),
                    ("strides", Attr::ints(stride)),
                    ("padding", Attr::ints(pad)),
                    ("layout", Attr::str("NHWC")),
                ]);
                let relax = if short == "max_pool2d" {
                    "nn.max_pool2d"
                } else {
                    a.insert("count_include_pad".into(), Attr::Bool(false));
                    "nn.avg_pool2d"
                };
                one(self.emit_vals(relax, &[x], a))
            }
            _ => bail!("unsupported op"),
        }
    }

    /// The values of a `!tosa.shape` operand.
    fn shape_operand(&self, op: &OperationRef, i: usize) -> PResult<Vec<i64>> {
        match self.operand(op, i)? {
            Val::Shape(v) => Ok(v),
            _ => bail!("operand {i} must be a tosa.const_shape"),
        }
    }

    /// Zero-point operands from `first` on: constants equal to 0 (float models).
    fn zero_points(&self, op: &OperationRef, first: usize) -> PResult<()> {
        for i in first..op.operand_count() {
            match self.operand(op, i)? {
                Val::Const(c) if c.splat() == Some(0.0) => {}
                _ => bail!("zero point (operand {i}) must be the constant 0"),
            }
        }
        Ok(())
    }

    fn tosa_conv(&mut self, op: &OperationRef, depthwise: bool) -> PResult<Val> {
        self.zero_points(op, 3)?;
        let x = self.operand(op, 0)?;
        let mut w = self.operand(op, 1)?;
        let bias = self.operand(op, 2)?;
        let ty = result_type(op, 0)?;
        let stride = i64_array(op, "stride")?;
        let dilation = i64_array(op, "dilation")?;
        let pad = tosa_pad(op)?;
        let wty = self.ty(&w);
        let (kernel_layout, groups) = if depthwise {
            // [KH, KW, C, M] -> HWIO [KH, KW, 1, C*M], one group per input channel.
            let s = wty.shape.to_vec();
            if s.len() != 4 {
                bail!("depthwise weights must be rank 4, got {wty}");
            }
            w = self.reshape(w, &wty.with_shape([s[0], s[1], 1, s[2] * s[3]]))?;
            ("HWIO", s[2])
        } else {
            ("OHWI", 1)
        };
        let a = attrs(&[
            ("strides", Attr::ints(stride)),
            ("padding", Attr::ints(pad)),
            ("dilation", Attr::ints(dilation)),
            ("groups", Attr::Int(groups)),
            ("data_layout", Attr::str("NHWC")),
            ("kernel_layout", Attr::str(kernel_layout)),
        ]);
        let conv = self.emit_vals("nn.conv2d", &[x, w], a)?;
        if matches!(&bias, Val::Const(c) if c.splat() == Some(0.0)) {
            return Ok(conv);
        }
        self.elementwise("add", &[conv, bias], Attrs::new(), &ty)
    }
}

/// TOSA's `pad = [top, bottom, left, right]` as Relax's `[top, left, bottom, right]`.
fn tosa_pad(op: &OperationRef) -> PResult<Vec<i64>> {
    let p = i64_array(op, "pad")?;
    if p.len() != 4 {
        bail!("pad {p:?} must have 4 elements");
    }
    Ok(vec![p[0], p[2], p[1], p[3]])
}

fn const_shape(op: &OperationRef) -> PResult<Val> {
    let a = op
        .inherent_attribute("values")
        .map_err(|_| Problem::msg("has no values"))?;
    let d = DenseElementsAttribute::try_from(a)
        .map_err(|_| Problem::msg(format!("values {a} are not dense")))?;
    let n = if d.is_splat() { 1 } else { d.len() };
    let v = (0..n)
        .map(|i| {
            d.index_element(i)
                .map(|x| x as i64)
                .map_err(|e| Problem::msg(format!("values {a}: {e}")))
        })
        .collect::<PResult<Vec<_>>>()?;
    Ok(Val::Shape(v))
}

fn i32_array(op: &OperationRef, name: &str) -> PResult<Vec<i64>> {
    let a = op
        .inherent_attribute(name)
        .map_err(|_| Problem::msg(format!("has no attribute '{name}'")))?;
    let arr = DenseI32ArrayAttribute::try_from(a)
        .map_err(|_| Problem::msg(format!("attribute '{name}' = {a} is not array<i32>")))?;
    (0..arr.len())
        .map(|i| {
            arr.element(i)
                .map(i64::from)
                .map_err(|e| Problem::msg(e.to_string()))
        })
        .collect()
}

fn float_attr(op: &OperationRef, name: &str) -> PResult<f64> {
    let a = op
        .inherent_attribute(name)
        .map_err(|_| Problem::msg(format!("has no attribute '{name}'")))?;
    melior::ir::attribute::FloatAttribute::try_from(a)
        .map(|f| f.value())
        .map_err(|_| Problem::msg(format!("attribute '{name}' = {a} is not a float")))
}
