//! ONNX export: a module's `@main` as an ONNX model (opset [`EXPORT_OPSET`]), written with the
//! same `onnx-protobuf` messages the frontend decodes.
//!
//! The export is the frontend's inverse on the ops it maps one to one: importing an exported
//! module gives back the same bindings (up to value names and the position of constants), so
//! its tasks and keys are unchanged. What is written:
//! - every parameter of `@main` is a graph input with its static shape; weights are not data
//!   (a structure-only model, as the bundled Keras models are), so TVM's `from_onnx` and our
//!   frontend both keep them as parameters;
//! - every `constant` binding is an initializer holding its value;
//! - every other binding is one ONNX node ([`exportable_ops`] lists the ops), except that
//!   operands ONNX wants as tensors (Clip's bounds, Reshape's shape, ReduceSum's axes) become
//!   initializers named after the node's result. ONNX's Clip has tensor bounds, so a `clip`
//!   comes back with `tensor_bounds = true` (one without it, Relax's clip, changes key);
//! - the results of `@main` are the graph outputs.
//!
//! The `onnx-protobuf` messages follow proto3, which does not write a scalar field holding
//! zero. A reader of ONNX's proto2 schema (the `onnx` Python package, so TVM) then sees an
//! INT attribute without a value and rejects it. So a zero int attribute is left out where
//! ONNX's default is 0 (`ceil_mode`, `count_include_pad`, Gather's `axis`), an axis 0 is
//! written as its negative equivalent, and `keepdims = 0` or a zero float attribute is refused.
//!
//! Only what ONNX can say is accepted: NCHW/OIHW layouts, no `out_dtype`, no calls between
//! functions (export before `partition`). Anything else is an [`ExportError`] naming the module
//! and the binding.

use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::module::{Binding, Callee, Function, Module};
use crate::ty::TensorType;
use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_proto::DataType;
use onnx_protobuf::tensor_shape_proto::Dimension;
use onnx_protobuf::type_proto::{self, Tensor as TensorTypeProto};
use onnx_protobuf::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// The default-domain opset of exported models.
pub const EXPORT_OPSET: i64 = 17;

/// A module could not be exported. `Display` is one line: module, binding, problem.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{module}: {place}{message}")]
pub struct ExportError {
    /// The module's name.
    pub module: String,
    /// The binding (`%result = op`) with a trailing `": "`, or empty for the whole module.
    pub place: String,
    /// What cannot be exported.
    pub message: String,
}

/// The IR ops the exporter writes, each as one ONNX node.
pub fn exportable_ops() -> impl Iterator<Item = &'static str> {
    OP_TYPES.iter().map(|(ir, _)| *ir)
}

/// IR op -> ONNX op type, for ops whose attributes need no translation beyond the generic
/// code in [`node_attrs`].
const OP_TYPES: &[(&str, &str)] = &[
    ("abs", "Abs"),
    ("add", "Add"),
    ("astype", "Cast"),
    ("ceil", "Ceil"),
    ("clip", "Clip"),
    ("concat", "Concat"),
    ("constant", ""),
    ("cos", "Cos"),
    ("divide", "Div"),
    ("erf", "Erf"),
    ("exp", "Exp"),
    ("expand_dims", "Unsqueeze"),
    ("floor", "Floor"),
    ("log", "Log"),
    ("matmul", "MatMul"),
    ("max", "ReduceMax"),
    ("maximum", "Max"),
    ("mean", "ReduceMean"),
    ("min", "ReduceMin"),
    ("minimum", "Min"),
    ("multiply", "Mul"),
    ("negative", "Neg"),
    ("nn.avg_pool2d", "AveragePool"),
    ("nn.conv2d", "Conv"),
    ("nn.layer_norm", "LayerNormalization"),
    ("nn.log_softmax", "LogSoftmax"),
    ("nn.max_pool2d", "MaxPool"),
    ("nn.relu", "Relu"),
    ("nn.softmax", "Softmax"),
    ("permute_dims", "Transpose"),
    ("power", "Pow"),
    ("prod", "ReduceProd"),
    ("reshape", "Reshape"),
    ("round", "Round"),
    ("sigmoid", "Sigmoid"),
    ("sin", "Sin"),
    ("sqrt", "Sqrt"),
    ("squeeze", "Squeeze"),
    ("subtract", "Sub"),
    ("sum", "ReduceSum"),
    ("take", "Gather"),
    ("tanh", "Tanh"),
];

/// Exports `@main` of `m` as a serialized ONNX model.
pub fn export_module(m: &Module) -> Result<Vec<u8>, ExportError> {
    let model = export_model(m)?;
    model.write_to_bytes().map_err(|e| ExportError {
        module: m.name.clone(),
        place: String::new(),
        message: format!("cannot serialize the model: {e}"),
    })
}

/// Exports `@main` of `m` as an ONNX `ModelProto`.
pub fn export_model(m: &Module) -> Result<ModelProto, ExportError> {
    let fail = |place: String, message: String| ExportError {
        module: m.name.clone(),
        place,
        message,
    };
    crate::verify::verify_module(m).map_err(|e| fail(String::new(), e.to_string()))?;
    let main = m
        .function("main")
        .ok_or_else(|| fail(String::new(), "has no function @main".into()))?;
    let mut graph = GraphProto::new();
    graph.name = m.name.clone();
    for &p in &main.params {
        graph
            .input
            .push(value_info(main.name_of(p), main.ty(p)).map_err(|e| fail(String::new(), e))?);
    }
    for (index, b) in main.bindings.iter().enumerate() {
        let place = match b.results.first() {
            Some(r) => format!("%{} = {}: ", main.name_of(*r), callee_name(b)),
            None => format!("binding {index} ({}): ", callee_name(b)),
        };
        export_binding(main, b, index, &mut graph).map_err(|e| fail(place, e))?;
    }
    for &r in &main.results {
        graph
            .output
            .push(value_info(main.name_of(r), main.ty(r)).map_err(|e| fail(String::new(), e))?);
    }
    let mut model = ModelProto::new();
    model.ir_version = 8;
    model.producer_name = "tgc".into();
    model.producer_version = env!("CARGO_PKG_VERSION").into();
    let mut opset = OperatorSetIdProto::new();
    opset.version = EXPORT_OPSET;
    model.opset_import.push(opset);
    model.graph = Some(graph).into();
    Ok(model)
}

fn callee_name(b: &Binding) -> String {
    match &b.callee {
        Callee::Op(op) => op.name().to_string(),
        Callee::Func(f) => format!("call @{f}"),
    }
}

type R<T> = Result<T, String>;

fn export_binding(f: &Function, b: &Binding, index: usize, graph: &mut GraphProto) -> R<()> {
    let op = match &b.callee {
        Callee::Op(op) => *op,
        Callee::Func(_) => {
            return Err(
                "calls between functions cannot be exported (export before 'partition')".into(),
            )
        }
    };
    let attrs = op.with_defaults(&b.attrs);
    let name = op.name();
    let Some(&(_, op_type)) = OP_TYPES.iter().find(|(ir, _)| *ir == name) else {
        return Err(format!(
            "op '{name}' has no ONNX export; exportable ops: {}",
            exportable_ops().collect::<Vec<_>>().join(", ")
        ));
    };
    let result = f.name_of(b.results[0]).to_string();
    if name == "constant" {
        graph
            .initializer
            .push(constant_tensor(&result, f.ty(b.results[0]), &attrs)?);
        return Ok(());
    }
    let mut inputs: Vec<String> = b
        .operands
        .iter()
        .map(|v| f.name_of(*v).to_string())
        .collect();
    let data = f.ty(b.operands[0]);
    let mut extra = |suffix: &str, t: TensorProto| -> String {
        let mut t = t;
        t.name = format!("{result}.{suffix}");
        let n = t.name.clone();
        graph.initializer.push(t);
        n
    };
    let mut out: Vec<AttributeProto> = Vec::new();
    if attrs.get("out_dtype").is_some() || attrs.get("out_layout").is_some() {
        return Err("'out_dtype' and 'out_layout' cannot be exported".into());
    }
    match name {
        "nn.conv2d" => {
            expect_str(&attrs, "data_layout", "NCHW")?;
            expect_str(&attrs, "kernel_layout", "OIHW")?;
            let w = f.ty(b.operands[1]);
            out.push(a_ints("kernel_shape", &w.shape[2..]));
            out.push(a_ints("strides", &ints(&attrs, "strides")?));
            out.push(a_ints("pads", &pads(&attrs, "padding")?));
            out.push(a_ints("dilations", &ints(&attrs, "dilation")?));
            out.push(a_int("group", int(&attrs, "groups")?));
        }
        "nn.max_pool2d" | "nn.avg_pool2d" => {
            expect_str(&attrs, "layout", "NCHW")?;
            out.push(a_ints("kernel_shape", &ints(&attrs, "pool_size")?));
            out.push(a_ints("strides", &ints(&attrs, "strides")?));
            out.push(a_ints("pads", &pads(&attrs, "padding")?));
            push_default_zero(&mut out, "ceil_mode", boolean(&attrs, "ceil_mode")? as i64);
            let dilation = ints(&attrs, "dilation")?;
            if name == "nn.avg_pool2d" {
                if dilation != [1, 1] {
                    return Err(format!(
                        "AveragePool has no dilations before opset 19, got {dilation:?}"
                    ));
                }
                let include = boolean(&attrs, "count_include_pad")?;
                push_default_zero(&mut out, "count_include_pad", include as i64);
            } else {
                out.push(a_ints("dilations", &dilation));
            }
        }
        "mean" | "max" | "min" | "prod" | "sum" => {
            let axes = match attrs.get("axis") {
                Some(a) => a
                    .as_ints()
                    .ok_or("attribute 'axis' is not a list of ints")?,
                None => (0..data.rank() as i64).collect(),
            };
            if !boolean(&attrs, "keepdims")? {
                // ONNX's default is 1, and a 0 would not be written (see the module docs).
                return Err("'keepdims = false' cannot be exported".into());
            }
            if name == "sum" {
                // ReduceSum takes its axes as an input from opset 13 on.
                inputs.push(extra("axes", i64_tensor(&[axes.len() as i64], &axes)));
            } else {
                out.push(a_ints("axes", &axes));
            }
        }
        "clip" => {
            let lo = float(&attrs, "min")?;
            let hi = float(&attrs, "max")?;
            inputs.push(extra("min", scalar_tensor(data.dtype, lo)?));
            inputs.push(extra("max", scalar_tensor(data.dtype, hi)?));
        }
        "reshape" => {
            let shape = ints(&attrs, "shape")?;
            inputs.push(extra("shape", i64_tensor(&[shape.len() as i64], &shape)));
        }
        "expand_dims" | "squeeze" => {
            let axes = match attrs.get("axis") {
                Some(a) => a
                    .as_ints()
                    .ok_or("attribute 'axis' is not a list of ints")?,
                None => Vec::new(),
            };
            if !axes.is_empty() {
                inputs.push(extra("axes", i64_tensor(&[axes.len() as i64], &axes)));
            }
        }
        "permute_dims" => {
            if let Some(a) = attrs.get("axes") {
                out.push(a_ints(
                    "perm",
                    &a.as_ints()
                        .ok_or("attribute 'axes' is not a list of ints")?,
                ));
            }
        }
        "concat" | "nn.softmax" | "nn.log_softmax" => {
            out.push(a_int(
                "axis",
                nonzero_axis(int(&attrs, "axis")?, data.rank()),
            ));
        }
        "nn.layer_norm" => {
            let axes = ints(&attrs, "axes")?;
            let rank = data.rank() as i64;
            let norm: Vec<i64> = axes
                .iter()
                .map(|a| if *a < 0 { a + rank } else { *a })
                .collect();
            let first = norm.first().copied().unwrap_or(rank);
            if norm != (first..rank).collect::<Vec<_>>() {
                return Err(format!(
                    "LayerNormalization normalizes trailing axes only, got axes {axes:?}"
                ));
            }
            if !boolean(&attrs, "center")? || !boolean(&attrs, "scale")? {
                return Err("LayerNormalization always centers and scales".into());
            }
            out.push(a_int("axis", nonzero_axis(first, data.rank())));
            let eps = float(&attrs, "epsilon")? as f32;
            if eps == 0.0 {
                return Err("'epsilon = 0' cannot be exported (see the module docs)".into());
            }
            out.push(a_float("epsilon", eps));
        }
        "take" => {
            let axis = attrs
                .get("axis")
                .and_then(Attr::as_int)
                .ok_or("'take' without an axis (flattened data) has no ONNX Gather")?;
            push_default_zero(&mut out, "axis", axis);
        }
        "astype" => {
            let dtype = attrs
                .get("dtype")
                .and_then(Attr::as_str)
                .and_then(DType::from_tvm_name)
                .ok_or("attribute 'dtype' is not a TVM dtype name")?;
            out.push(a_int("to", onnx_dtype(dtype)? as i64));
        }
        _ => {}
    }
    let mut node = NodeProto::new();
    node.name = format!("{op_type}_{index}");
    node.op_type = op_type.to_string();
    node.input = inputs;
    node.output = b
        .results
        .iter()
        .map(|r| f.name_of(*r).to_string())
        .collect();
    node.attribute = out;
    graph.node.push(node);
    Ok(())
}

fn expect_str(attrs: &Attrs, name: &str, want: &str) -> R<()> {
    match attrs.get(name).and_then(Attr::as_str) {
        Some(s) if s == want => Ok(()),
        Some(s) => Err(format!(
            "attribute '{name}' = \"{s}\" cannot be exported (only \"{want}\")"
        )),
        None => Err(format!("attribute '{name}' is missing")),
    }
}

fn ints(attrs: &Attrs, name: &str) -> R<Vec<i64>> {
    attrs
        .get(name)
        .and_then(Attr::as_ints)
        .ok_or_else(|| format!("attribute '{name}' is missing or not a list of ints"))
}

fn int(attrs: &Attrs, name: &str) -> R<i64> {
    attrs
        .get(name)
        .and_then(Attr::as_int)
        .ok_or_else(|| format!("attribute '{name}' is missing or not an int"))
}

fn float(attrs: &Attrs, name: &str) -> R<f64> {
    attrs
        .get(name)
        .and_then(Attr::as_float)
        .ok_or_else(|| format!("attribute '{name}' is missing or not a number"))
}

fn boolean(attrs: &Attrs, name: &str) -> R<bool> {
    attrs
        .get(name)
        .and_then(Attr::as_bool)
        .ok_or_else(|| format!("attribute '{name}' is missing or not a bool"))
}

/// Relax 2-D padding (1, 2 or 4 values) as ONNX pads `[top, left, bottom, right]`.
fn pads(attrs: &Attrs, name: &str) -> R<Vec<i64>> {
    let p = ints(attrs, name)?;
    Ok(match p[..] {
        [a] => vec![a; 4],
        [h, w] => vec![h, w, h, w],
        [_, _, _, _] => p,
        _ => return Err(format!("attribute '{name}' must have 1, 2 or 4 values")),
    })
}

fn onnx_dtype(d: DType) -> R<DataType> {
    Ok(match d {
        DType::Bool => DataType::BOOL,
        DType::I8 => DataType::INT8,
        DType::I16 => DataType::INT16,
        DType::I32 => DataType::INT32,
        DType::I64 => DataType::INT64,
        DType::U8 => DataType::UINT8,
        DType::U16 => DataType::UINT16,
        DType::U32 => DataType::UINT32,
        DType::U64 => DataType::UINT64,
        DType::F16 => DataType::FLOAT16,
        DType::BF16 => DataType::BFLOAT16,
        DType::F32 => DataType::FLOAT,
        DType::F64 => DataType::DOUBLE,
    })
}

fn value_info(name: &str, t: &TensorType) -> R<ValueInfoProto> {
    let mut tt = TensorTypeProto::new();
    tt.elem_type = onnx_dtype(t.dtype)? as i32;
    let mut shape = TensorShapeProto::new();
    for &d in &t.shape {
        let mut dim = Dimension::new();
        dim.set_dim_value(d);
        shape.dim.push(dim);
    }
    tt.shape = Some(shape).into();
    let mut ty = TypeProto::new();
    ty.value = Some(type_proto::Value::TensorType(tt));
    let mut vi = ValueInfoProto::new();
    vi.name = name.to_string();
    vi.type_ = Some(ty).into();
    Ok(vi)
}

fn i64_tensor(dims: &[i64], values: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.data_type = DataType::INT64 as i32;
    t.dims = dims.to_vec();
    t.int64_data = values.to_vec();
    t
}

fn scalar_tensor(dtype: DType, v: f64) -> R<TensorProto> {
    let mut t = TensorProto::new();
    t.data_type = onnx_dtype(dtype)? as i32;
    fill(&mut t, dtype, &[v])?;
    Ok(t)
}

fn fill(t: &mut TensorProto, dtype: DType, values: &[f64]) -> R<()> {
    match dtype {
        DType::F32 => t.float_data = values.iter().map(|v| *v as f32).collect(),
        DType::F64 => t.double_data = values.to_vec(),
        DType::I64 => t.int64_data = values.iter().map(|v| *v as i64).collect(),
        DType::I32 => t.int32_data = values.iter().map(|v| *v as i32).collect(),
        other => return Err(format!("constants of dtype {other} cannot be exported")),
    }
    Ok(())
}

/// A `constant` binding as an initializer: its values, a single value splatted to the shape.
fn constant_tensor(name: &str, ty: &TensorType, attrs: &Attrs) -> R<TensorProto> {
    let values = attrs
        .get("value")
        .and_then(Attr::as_floats)
        .ok_or("attribute 'value' is missing")?;
    let n = ty.num_elements() as usize;
    let values = match values.len() {
        1 => vec![values[0]; n],
        len if len == n => values,
        len => return Err(format!("{len} values for a tensor of {n} elements")),
    };
    let mut t = TensorProto::new();
    t.name = name.to_string();
    t.data_type = onnx_dtype(ty.dtype)? as i32;
    t.dims = ty.shape.to_vec();
    fill(&mut t, ty.dtype, &values)?;
    Ok(t)
}

fn attr(name: &str, kind: AttributeType) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.to_string();
    a.type_ = kind.into();
    a
}

/// An int attribute whose ONNX default is 0: left out when it is 0.
fn push_default_zero(out: &mut Vec<AttributeProto>, name: &str, v: i64) {
    if v != 0 {
        out.push(a_int(name, v));
    }
}

/// Axis 0 as its negative equivalent, so that it survives encoding.
fn nonzero_axis(axis: i64, rank: usize) -> i64 {
    if axis == 0 {
        -(rank as i64)
    } else {
        axis
    }
}

fn a_int(name: &str, v: i64) -> AttributeProto {
    let mut a = attr(name, AttributeType::INT);
    a.i = v;
    a
}

fn a_ints(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = attr(name, AttributeType::INTS);
    a.ints = v.to_vec();
    a
}

fn a_float(name: &str, v: f32) -> AttributeProto {
    let mut a = attr(name, AttributeType::FLOAT);
    a.f = v;
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::import_bytes;
    use crate::text::parse_module;

    fn roundtrip(src: &str) -> (Module, Module) {
        let m = parse_module(src, "t.tgc").expect("parses");
        let bytes = export_module(&m).unwrap_or_else(|e| panic!("{e}"));
        let back = import_bytes(&bytes, "t.onnx", &[]).unwrap_or_else(|e| panic!("{e}"));
        (m, back)
    }

    /// Each binding of `@main` as op, attributes with defaults and result types (value names
    /// and operand names aside: the importer may rename).
    fn bodies(m: &Module) -> Vec<String> {
        let f = m.function("main").expect("main");
        f.bindings
            .iter()
            .map(|b| {
                let op = b.callee.op().expect("an op");
                let types: Vec<String> = b.results.iter().map(|r| f.ty(*r).to_string()).collect();
                format!("{op} {:?} {}", op.with_defaults(&b.attrs), types.join(","))
            })
            .collect()
    }

    #[test]
    fn conv_pool_chain_comes_back_unchanged() {
        let (m, back) = roundtrip(
            r#"module @m {
  func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<1x4x1x1xf32>) -> tensor<1x4xf32> {
    %0 = nn.conv2d(%x, %w) {strides = [2, 2], padding = [1, 1, 1, 1]} : tensor<1x4x4x4xf32>
    %1 = add(%0, %b) : tensor<1x4x4x4xf32>
    %2 = clip(%1) {min = 0.0, max = 6.0, tensor_bounds = true} : tensor<1x4x4x4xf32>
    %3 = nn.max_pool2d(%2) {pool_size = [3, 3], strides = [1, 1], padding = [1, 1, 1, 1], ceil_mode = true} : tensor<1x4x4x4xf32>
    %4 = nn.avg_pool2d(%3) {pool_size = [3, 3], padding = [1, 1, 1, 1], count_include_pad = true} : tensor<1x4x4x4xf32>
    %5 = mean(%4) {axis = [2, 3], keepdims = true} : tensor<1x4x1x1xf32>
    %6 = reshape(%5) {shape = [1, 4]} : tensor<1x4xf32>
    return %6
  }
}"#,
        );
        assert_eq!(bodies(&back), bodies(&m));
    }

    #[test]
    fn transformer_ops_come_back_unchanged() {
        let (m, back) = roundtrip(
            r#"module @m {
  func @main(%ids: tensor<1x4xi64>, %emb: tensor<10x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<1x2x4x4xf32> {
    %0 = take(%emb, %ids) {axis = 0} : tensor<1x4x8xf32>
    %1 = nn.layer_norm(%0, %g, %b) {axes = [2], epsilon = 0.5} : tensor<1x4x8xf32>
    %2 = reshape(%1) {shape = [1, 4, 2, 4]} : tensor<1x4x2x4xf32>
    %3 = permute_dims(%2) {axes = [0, 2, 1, 3]} : tensor<1x2x4x4xf32>
    %4 = permute_dims(%2) {axes = [0, 2, 3, 1]} : tensor<1x2x4x4xf32>
    %5 = matmul(%3, %4) : tensor<1x2x4x4xf32>
    %c = constant() {value = [2.0], shape = [], dtype = "float32"} : tensor<f32>
    %6 = divide(%5, %c) : tensor<1x2x4x4xf32>
    %7 = nn.softmax(%6) {axis = -1} : tensor<1x2x4x4xf32>
    %8 = erf(%7) : tensor<1x2x4x4xf32>
    %9 = concat(%8) {axis = 1} : tensor<1x2x4x4xf32>
    return %9
  }
}"#,
        );
        assert_eq!(bodies(&back), bodies(&m));
    }

    /// proto3 drops a zero scalar, which proto2 readers (TVM) then reject: none is written.
    #[test]
    fn no_int_attribute_holds_zero() {
        let (m, back) = roundtrip(
            r#"module @m {
  func @main(%x: tensor<2x3xf32>, %t: tensor<4x3xf32>, %i: tensor<2xi64>) -> tensor<6x3xf32> {
    %0 = concat(%x, %x, %x) {axis = 0} : tensor<6x3xf32>
    %1 = take(%t, %i) {axis = 0} : tensor<2x3xf32>
    %2 = nn.softmax(%0) {axis = 0} : tensor<6x3xf32>
    return %2
  }
}"#,
        );
        // The frontend normalizes Concat's -2 back to 0 (it keeps Softmax's axis as given).
        assert!(
            bodies(&back)[0].contains("\"axis\": Int(0)"),
            "{:?}",
            bodies(&back)
        );
        let model = export_model(&m).expect("exports");
        for node in &model.graph.node {
            for a in &node.attribute {
                if a.type_.enum_value() == Ok(AttributeType::INT) {
                    assert_ne!(a.i, 0, "{} of {}", a.name, node.op_type);
                }
            }
        }
    }

    #[test]
    fn unsupported_op_is_one_line_naming_the_binding() {
        let m = parse_module(
            r#"module @m {
  func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = nn.gelu(%x) : tensor<4xf32>
    return %y
  }
}"#,
            "t.tgc",
        )
        .expect("parses");
        let e = export_module(&m).unwrap_err().to_string();
        assert!(
            e.starts_with("m: %y = nn.gelu: op 'nn.gelu' has no ONNX export"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn layouts_onnx_cannot_say_are_refused() {
        let m = parse_module(
            r#"module @m {
  func @main(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x1x1xf32>) -> tensor<1x8x8x4xf32> {
    %y = nn.conv2d(%x, %w) {data_layout = "NHWC"} : tensor<1x8x8x4xf32>
    return %y
  }
}"#,
            "t.tgc",
        )
        .expect("parses");
        let e = export_module(&m).unwrap_err().to_string();
        assert!(e.contains("'data_layout' = \"NHWC\""), "{e}");
    }
}
