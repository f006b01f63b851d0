//! The importer's state while it walks the graph: which IR value or constant each ONNX name
//! stands for, and the one place where ops are emitted ([`Importer::emit`]), folded when all
//! operands are constants, or written as bindings with inferred types.
//!
//! Constants stay symbolic until an op needs them as data; [`Importer::materialize`] then
//! applies the constant policy described in the module docs of [`crate::onnx`].

use super::error::{bail, one_line, PResult, Problem};
use super::eval;
use super::names::sanitize;
use super::tensor::{self, Tensor};
use super::ImportOptions;
use crate::attr::Attrs;
use crate::module::{Binding, Callee, Function, ValueId};
use crate::ops::Op;
use crate::ty::TensorType;
use crate::verify::check_attrs;
use onnx_protobuf::TensorProto;
use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::rc::Rc;

/// Where a constant's value comes from.
pub(crate) enum Origin<'m> {
    /// An initializer or the tensor of a `Constant` node: a named weight, decoded on demand.
    Weight(&'m TensorProto),
    /// Computed by folding (or built by a converter); always small.
    Computed(Rc<Tensor>),
}

/// A constant the graph refers to by name.
pub(crate) struct Constant<'m> {
    /// The ONNX name (used to name the IR value if it is materialized).
    pub name: String,
    pub ty: TensorType,
    pub origin: Origin<'m>,
    decoded: OnceCell<Option<Rc<Tensor>>>,
    materialized: Cell<Option<ValueId>>,
}

/// What an ONNX value name stands for.
#[derive(Clone)]
pub(crate) enum Val<'m> {
    Ir(ValueId),
    Const(Rc<Constant<'m>>),
}

impl<'m> Val<'m> {
    pub fn weight(name: &str, proto: &'m TensorProto) -> PResult<Val<'m>> {
        let ty = tensor::proto_type(proto)?;
        Ok(Val::Const(Rc::new(Constant {
            name: name.to_string(),
            ty,
            origin: Origin::Weight(proto),
            decoded: OnceCell::new(),
            materialized: Cell::new(None),
        })))
    }

    pub fn computed(name: &str, t: Tensor) -> Val<'m> {
        let t = Rc::new(t);
        Val::Const(Rc::new(Constant {
            name: name.to_string(),
            ty: t.ty(),
            decoded: OnceCell::from(Some(t.clone())),
            origin: Origin::Computed(t),
            materialized: Cell::new(None),
        }))
    }

    pub fn is_const(&self) -> bool {
        matches!(self, Val::Const(_))
    }
}

/// Importer state for one graph.
pub(crate) struct Importer<'m, 'o> {
    pub f: Function,
    /// What each ONNX value name defined so far stands for.
    pub env: HashMap<&'m str, Val<'m>>,
    pub opts: &'o ImportOptions,
    /// The default-domain opset the model imports.
    pub opset: i64,
    /// IR names for the current node's outputs (`None`: empty or unusable ONNX name).
    pub out_names: Vec<Option<String>>,
}

impl<'m, 'o> Importer<'m, 'o> {
    pub fn new(f: Function, opts: &'o ImportOptions, opset: i64) -> Self {
        Importer {
            f,
            env: HashMap::new(),
            opts,
            opset,
            out_names: Vec::new(),
        }
    }

    /// The type of a value.
    pub fn ty(&self, v: &Val<'m>) -> TensorType {
        match v {
            Val::Ir(id) => self.f.ty(*id).clone(),
            Val::Const(c) => c.ty.clone(),
        }
    }

    pub fn shape(&self, v: &Val<'m>) -> Vec<i64> {
        self.ty(v).shape.to_vec()
    }

    pub fn rank(&self, v: &Val<'m>) -> usize {
        match v {
            Val::Ir(id) => self.f.ty(*id).rank(),
            Val::Const(c) => c.ty.rank(),
        }
    }

    /// The value of a constant if it may be folded: weights only up to the fold limits
    /// (floats below [`ImportOptions::fold_float_max_elements`]); `None` for run-time values
    /// and big weights.
    pub fn try_const(&self, v: &Val<'m>) -> PResult<Option<Rc<Tensor>>> {
        let Val::Const(c) = v else { return Ok(None) };
        if let Some(t) = c.decoded.get() {
            return Ok(t.clone());
        }
        let Origin::Weight(proto) = &c.origin else {
            return Ok(None);
        };
        let n = c.ty.num_elements() as usize;
        let limit = if c.ty.dtype.is_float() {
            self.opts.fold_float_max_elements
        } else {
            self.opts.fold_int_max_elements
        };
        let decoded = if n > limit {
            None
        } else {
            let t = tensor::decode(proto, limit).map_err(|p| {
                Problem::msg(format!("constant '{}': {}", one_line(&c.name), p.message))
            })?;
            Some(Rc::new(t))
        };
        Ok(c.decoded.get_or_init(|| decoded).clone())
    }

    /// The value of an operand that the op needs at import time (a shape, pads, axes, ...).
    pub fn require_const(&self, v: &Val<'m>, what: &str) -> PResult<Rc<Tensor>> {
        match self.try_const(v)? {
            Some(t) => Ok(t),
            None if v.is_const() => bail!("{what} is a constant too large to read"),
            None => bail!("{what} must be a constant; it is computed at run time"),
        }
    }

    /// A constant operand as integers.
    pub fn const_ints(&self, v: &Val<'m>, what: &str) -> PResult<Vec<i64>> {
        let t = self.require_const(v, what)?;
        if t.dtype.is_float() {
            bail!("{what} must be integers, got {}", t.dtype);
        }
        Ok(t.to_i64s())
    }

    /// A constant scalar (or one-element tensor) operand as a float.
    pub fn const_scalar(&self, v: &Val<'m>, what: &str) -> PResult<f64> {
        let t = self.require_const(v, what)?;
        match t.to_f64s().as_slice() {
            [x] => Ok(*x),
            _ => bail!("{what} must have one element, got shape {:?}", t.shape),
        }
    }

    /// The IR value of `v`, materializing a constant on first use as data: tiny constants
    /// (and everything computed by folding) become `constant` bindings, other weights become
    /// parameters of the function.
    pub fn materialize(&mut self, v: &Val<'m>) -> PResult<ValueId> {
        let c = match v {
            Val::Ir(id) => return Ok(*id),
            Val::Const(c) => c.clone(),
        };
        if let Some(id) = c.materialized.get() {
            return Ok(id);
        }
        let n = c.ty.num_elements() as usize;
        let hint = sanitize(&c.name);
        let binding_value = match &c.origin {
            Origin::Computed(t) => Some(t.clone()),
            Origin::Weight(_) if n <= self.opts.constant_binding_max_elements => {
                match self.try_const(v)? {
                    Some(t) => Some(t),
                    None => bail!("constant '{}' could not be read", c.name),
                }
            }
            Origin::Weight(_) => None,
        };
        let id = match binding_value {
            Some(t) => {
                let op = self.lookup("constant")?;
                let attrs = op.with_defaults(&t.constant_attrs());
                let id = self.f.new_value(hint.as_deref(), t.ty());
                self.f.push(Binding {
                    results: [id].into_iter().collect(),
                    callee: Callee::Op(op),
                    operands: Default::default(),
                    attrs,
                });
                id
            }
            None => self.f.add_param(hint.as_deref(), c.ty.clone()),
        };
        c.materialized.set(Some(id));
        Ok(id)
    }

    fn lookup(&self, op: &str) -> PResult<Op> {
        match Op::lookup(op) {
            Some(o) => Ok(o),
            None => bail!("IR op '{op}' is not in the op registry"),
        }
    }

    /// A name hint for a temporary of the current node: `<output>.<op>`.
    fn tmp_hint(&self, op: &str) -> Option<String> {
        let base = self.out_names.first().cloned().flatten()?;
        let short = op.rsplit('.').next().unwrap_or(op);
        Some(format!("{base}.{short}"))
    }

    /// Emits `op` as a temporary of the current node; one result.
    pub fn op(&mut self, op: &str, operands: &[Val<'m>], attrs: Attrs) -> PResult<Val<'m>> {
        let hint = self.tmp_hint(op);
        let mut r = self.emit(op, operands, attrs, &[hint])?;
        r.truncate(1);
        match r.pop() {
            Some(v) => Ok(v),
            None => bail!("'{op}' has no result"),
        }
    }

    /// Emits `op` as the final op of the current node: its results are named after the
    /// node's outputs.
    pub fn out(&mut self, op: &str, operands: &[Val<'m>], attrs: Attrs) -> PResult<Vec<Val<'m>>> {
        let hints = self.out_names.clone();
        self.emit(op, operands, attrs, &hints)
    }

    /// [`Importer::out`] for single-result ops.
    pub fn out1(&mut self, op: &str, operands: &[Val<'m>], attrs: Attrs) -> PResult<Vec<Val<'m>>> {
        let mut r = self.out(op, operands, attrs)?;
        r.truncate(1);
        Ok(r)
    }

    /// Folds `op` when every operand is a readable constant and the evaluator supports it;
    /// otherwise appends a binding whose result types the op registry infers.
    pub fn emit(
        &mut self,
        op: &str,
        operands: &[Val<'m>],
        attrs: Attrs,
        hints: &[Option<String>],
    ) -> PResult<Vec<Val<'m>>> {
        let hint = |i: usize| hints.get(i).cloned().flatten();
        if let Some(tensors) = self.all_const(operands)? {
            let refs: Vec<&Tensor> = tensors.iter().map(|t| t.as_ref()).collect();
            if let Some(results) = eval::eval(op, &refs, &attrs, self.opts.fold_int_max_elements)? {
                let small = results
                    .iter()
                    .all(|t| !t.dtype.is_float() || t.len() <= self.opts.fold_float_max_elements);
                if small {
                    return Ok(results
                        .into_iter()
                        .enumerate()
                        .map(|(i, t)| Val::computed(&hint(i).unwrap_or_default(), t))
                        .collect());
                }
            }
        }
        let o = self.lookup(op)?;
        // The same checks as `Function::push_op`, which cannot name its results.
        if let Err(p) = check_attrs(o.def(), &attrs) {
            bail!("'{op}': {p}");
        }
        let mut ids = Vec::with_capacity(operands.len());
        for v in operands {
            ids.push(self.materialize(v)?);
        }
        let attrs = o.with_defaults(&attrs);
        let types: Vec<&TensorType> = ids.iter().map(|id| self.f.ty(*id)).collect();
        let result_types = o.infer(&types, &attrs).map_err(Problem::msg)?;
        for t in &result_types {
            tensor::num_elements(&t.shape)?;
        }
        let results: Vec<ValueId> = result_types
            .into_iter()
            .enumerate()
            .map(|(i, t)| self.f.new_value(hint(i).as_deref(), t))
            .collect();
        self.f.push(Binding {
            results: results.iter().copied().collect(),
            callee: Callee::Op(o),
            operands: ids.into_iter().collect(),
            attrs,
        });
        Ok(results.into_iter().map(Val::Ir).collect())
    }

    fn all_const(&self, operands: &[Val<'m>]) -> PResult<Option<Vec<Rc<Tensor>>>> {
        let mut out = Vec::with_capacity(operands.len());
        for v in operands {
            match self.try_const(v)? {
                Some(t) => out.push(t),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }
}
