//! Small ONNX graphs built in Rust with the `onnx-protobuf` types, serialized and imported.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_proto::DataType;
use onnx_protobuf::tensor_shape_proto::Dimension;
use onnx_protobuf::type_proto::{self, Tensor as TensorTypeProto};
use onnx_protobuf::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use tgc_ir::onnx::{import_bytes, ImportError};
use tgc_ir::{Function, Module};

pub use DataType::{FLOAT as F32, INT64 as I64};

/// A dimension of a graph input: static or named (dynamic).
pub enum Dim {
    Fixed(i64),
    Named(&'static str),
}

/// An ONNX graph under construction.
pub struct Graph {
    opset: i64,
    graph: GraphProto,
    next_node: usize,
}

impl Graph {
    pub fn new(opset: i64) -> Self {
        Graph {
            opset,
            graph: GraphProto::new(),
            next_node: 0,
        }
    }

    /// A graph input with a static shape.
    pub fn input(&mut self, name: &str, dtype: DataType, dims: &[i64]) -> &mut Self {
        let dims: Vec<Dim> = dims.iter().map(|d| Dim::Fixed(*d)).collect();
        self.input_dims(name, dtype, &dims)
    }

    pub fn input_dims(&mut self, name: &str, dtype: DataType, dims: &[Dim]) -> &mut Self {
        let vi = value_info(name, dtype, Some(dims));
        self.graph.input.push(vi);
        self
    }

    /// A graph input without any shape.
    pub fn input_unshaped(&mut self, name: &str, dtype: DataType) -> &mut Self {
        self.graph.input.push(value_info(name, dtype, None));
        self
    }

    pub fn init_f32(&mut self, name: &str, dims: &[i64], values: &[f32]) -> &mut Self {
        let mut t = tensor(DataType::FLOAT, dims);
        t.name = name.to_string();
        t.float_data = values.to_vec();
        self.graph.initializer.push(t);
        self
    }

    pub fn init_i64(&mut self, name: &str, dims: &[i64], values: &[i64]) -> &mut Self {
        let mut t = tensor(DataType::INT64, dims);
        t.name = name.to_string();
        t.int64_data = values.to_vec();
        self.graph.initializer.push(t);
        self
    }

    /// A float initializer stored as raw bytes (as exporters write big weights).
    pub fn init_raw_f32(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        let n: i64 = dims.iter().product();
        let mut t = tensor(DataType::FLOAT, dims);
        t.name = name.to_string();
        t.raw_data = (0..n)
            .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
            .collect();
        self.graph.initializer.push(t);
        self
    }

    /// Appends a node named `n<k>`; `""` in `inputs` is an absent optional input.
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> &mut Self {
        let mut n = NodeProto::new();
        n.name = format!("n{}", self.next_node);
        self.next_node += 1;
        n.op_type = op.to_string();
        n.input = inputs.iter().map(|s| s.to_string()).collect();
        n.output = outputs.iter().map(|s| s.to_string()).collect();
        n.attribute = attrs;
        self.graph.node.push(n);
        self
    }

    /// The last node added, to adjust it (domain, name).
    pub fn last_node(&mut self) -> &mut NodeProto {
        self.graph.node.last_mut().expect("a node")
    }

    pub fn output(&mut self, name: &str) -> &mut Self {
        self.graph
            .output
            .push(value_info(name, DataType::FLOAT, None));
        self
    }

    pub fn model(&self) -> ModelProto {
        let mut m = ModelProto::new();
        m.ir_version = 8;
        let mut opset = OperatorSetIdProto::new();
        opset.version = self.opset;
        m.opset_import.push(opset);
        m.graph = Some(self.graph.clone()).into();
        m
    }

    /// The serialized model. With `TGC_ONNX_SEEDS=DIR` set, each graph is also written to
    /// `DIR`, which seeds the `import_onnx` fuzz target with small valid models.
    pub fn bytes(&self) -> Vec<u8> {
        let bytes = self.model().write_to_bytes().expect("serializes");
        if let Some(dir) = std::env::var_os("TGC_ONNX_SEEDS") {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&bytes, &mut h);
            let name = format!("{:016x}.onnx", std::hash::Hasher::finish(&h));
            std::fs::write(std::path::Path::new(&dir).join(name), &bytes).expect("writes seed");
        }
        bytes
    }

    pub fn import(&self) -> Result<Module, ImportError> {
        import_bytes(&self.bytes(), "test.onnx", &[])
    }

    pub fn import_with(&self, shapes: &[(&str, &[i64])]) -> Result<Module, ImportError> {
        let shapes: Vec<(String, Vec<i64>)> = shapes
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_vec()))
            .collect();
        import_bytes(&self.bytes(), "test.onnx", &shapes)
    }

    /// Imports and verifies, panicking with the error's message on failure.
    pub fn ok(&self) -> Module {
        let m = self.import().unwrap_or_else(|e| panic!("{e}"));
        if let Err(e) = tgc_ir::verify_module(&m) {
            panic!(
                "imported module does not verify: {e}\n{}",
                tgc_ir::text::print_module(&m)
            );
        }
        m
    }

    /// Imports and returns the error's message, panicking if the import succeeds.
    pub fn err(&self) -> String {
        match self.import() {
            Ok(m) => panic!("expected an error, got\n{}", tgc_ir::text::print_module(&m)),
            Err(e) => e.to_string(),
        }
    }
}

fn value_info(name: &str, dtype: DataType, dims: Option<&[Dim]>) -> ValueInfoProto {
    let mut tt = TensorTypeProto::new();
    tt.elem_type = dtype as i32;
    if let Some(dims) = dims {
        let mut shape = TensorShapeProto::new();
        for d in dims {
            let mut dim = Dimension::new();
            match d {
                Dim::Fixed(v) => dim.set_dim_value(*v),
                Dim::Named(p) => dim.set_dim_param(p.to_string()),
            }
            shape.dim.push(dim);
        }
        tt.shape = Some(shape).into();
    }
    let mut ty = TypeProto::new();
    ty.value = Some(type_proto::Value::TensorType(tt));
    let mut vi = ValueInfoProto::new();
    vi.name = name.to_string();
    vi.type_ = Some(ty).into();
    vi
}

pub fn tensor(dtype: DataType, dims: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.data_type = dtype as i32;
    t.dims = dims.to_vec();
    t
}

fn attr(name: &str, kind: AttributeType) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.to_string();
    a.type_ = kind.into();
    a
}

pub fn a_int(name: &str, v: i64) -> AttributeProto {
    let mut a = attr(name, AttributeType::INT);
    a.i = v;
    a
}

pub fn a_ints(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = attr(name, AttributeType::INTS);
    a.ints = v.to_vec();
    a
}

pub fn a_float(name: &str, v: f32) -> AttributeProto {
    let mut a = attr(name, AttributeType::FLOAT);
    a.f = v;
    a
}

pub fn a_floats(name: &str, v: &[f32]) -> AttributeProto {
    let mut a = attr(name, AttributeType::FLOATS);
    a.floats = v.to_vec();
    a
}

pub fn a_str(name: &str, v: &str) -> AttributeProto {
    let mut a = attr(name, AttributeType::STRING);
    a.s = v.as_bytes().to_vec();
    a
}

pub fn a_tensor(name: &str, t: TensorProto) -> AttributeProto {
    let mut a = attr(name, AttributeType::TENSOR);
    a.t = Some(t).into();
    a
}

/// An int64 tensor value for `Constant` nodes.
pub fn i64_tensor(dims: &[i64], v: &[i64]) -> TensorProto {
    let mut t = tensor(DataType::INT64, dims);
    t.int64_data = v.to_vec();
    t
}

/// The function `@main` of a module.
pub fn main_fn(m: &Module) -> &Function {
    m.function("main").expect("@main")
}

/// The op names of `@main`'s bindings, in order.
pub fn op_seq(m: &Module) -> Vec<String> {
    main_fn(m)
        .bindings
        .iter()
        .map(|b| match &b.callee {
            tgc_ir::Callee::Op(op) => op.name().to_string(),
            tgc_ir::Callee::Func(f) => format!("call @{f}"),
        })
        .collect()
}

/// The type of `@main`'s single result, printed.
pub fn result_type(m: &Module) -> String {
    main_fn(m).result_types()[0].to_string()
}

/// The attributes of the first binding of `op` in `@main`.
pub fn attrs_of<'a>(m: &'a Module, op: &str) -> &'a tgc_ir::Attrs {
    &main_fn(m)
        .bindings
        .iter()
        .find(|b| b.callee.op().is_some_and(|o| o.name() == op))
        .unwrap_or_else(|| panic!("no '{op}' binding"))
        .attrs
}
