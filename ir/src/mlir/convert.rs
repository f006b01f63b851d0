//! StableHLO ops into IR bindings (see the module docs of [`super`] for the mapping).

use super::{bail, body_block, op_name, PResult, Problem};
use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::module::{Function, ValueId};
use crate::ty::TensorType;
use melior::ir::attribute::{
    Attribute, DenseElementsAttribute, DenseI64ArrayAttribute, IntegerAttribute,
};
use melior::ir::block::BlockLike;
use melior::ir::operation::OperationLike;
use melior::ir::{BlockRef, OperationRef, Value, ValueLike};
use std::collections::HashMap;
use std::rc::Rc;

/// Constants with at most this many elements keep their values; bigger ones become parameters.
const MAX_CONST_ELEMENTS: i64 = 16;
/// How deep `func.call`s may nest (a recursive module is refused).
const MAX_CALL_DEPTH: usize = 64;

/// A constant known at import time.
#[derive(Debug)]
pub(super) struct Const {
    pub(super) ty: TensorType,
    /// One value (a splat) or one per element; `None` for a big constant whose values are
    /// not read (it becomes a parameter).
    pub(super) values: Option<Vec<f64>>,
}

impl Const {
    pub(super) fn splat(&self) -> Option<f64> {
        match &self.values {
            Some(v) if v.len() == 1 => Some(v[0]),
            Some(v) if !v.is_empty() && v.iter().all(|x| x.to_bits() == v[0].to_bits()) => {
                Some(v[0])
            }
            _ => None,
        }
    }

    /// The values, one per element (a splat expanded).
    fn expanded(&self) -> Option<Vec<f64>> {
        let v = self.values.as_ref()?;
        let n = self.ty.num_elements() as usize;
        if v.len() == n {
            Some(v.clone())
        } else if v.len() == 1 && n <= MAX_CONST_ELEMENTS as usize {
            Some(vec![v[0]; n])
        } else {
            None
        }
    }
}

/// What an MLIR value stands for in the function being built.
#[derive(Clone, Debug)]
pub(super) enum Val {
    Ir(ValueId),
    Const(Rc<Const>),
    /// `src` broadcast (numpy-style: aligned at the right) to `ty`; elementwise consumers read
    /// `src` directly.
    Bcast {
        src: Box<Val>,
        ty: TensorType,
    },
    /// A TOSA shape (`!tosa.shape<N>` of `tosa.const_shape`): not a tensor.
    Shape(Vec<i64>),
}

pub(super) struct Cx<'f, 'c, 'a> {
    f: Function,
    funcs: &'f HashMap<String, OperationRef<'c, 'a>>,
    env: HashMap<usize, Val>,
    /// `constant` bindings and parameters already made for a constant (the constant is kept
    /// alive with its entry, so its address is not reused).
    materialized: HashMap<*const Const, (Rc<Const>, ValueId)>,
    depth: usize,
    next_const_param: usize,
    /// The dialects of the ops converted (`stablehlo`, `chlo`, `tosa`).
    dialects: std::collections::BTreeSet<String>,
}

fn key(v: &Value) -> usize {
    v.to_raw().ptr as usize
}

/// Converts `@name` and every function it calls into one IR function `@main`.
/// Also returns the dialects its ops came from (`stablehlo,chlo`, `tosa`).
pub(super) fn convert_main(
    funcs: &HashMap<String, OperationRef<'_, '_>>,
    name: &str,
) -> PResult<(Function, String)> {
    let main = funcs[name];
    let block = body_block(&main).ok_or_else(|| Problem::msg("has no body").at(&main))?;
    let mut cx = Cx {
        f: Function::new("main"),
        funcs,
        env: HashMap::new(),
        materialized: HashMap::new(),
        depth: 0,
        next_const_param: 0,
        dialects: Default::default(),
    };
    let mut args = Vec::new();
    for i in 0..block.argument_count() {
        let arg = block
            .argument(i)
            .map_err(|e| Problem::msg(e.to_string()).at(&main))?;
        let ty = tensor_type(&arg.r#type().to_string())
            .map_err(|m| Problem::msg(format!("argument {i}: {m}")).at(&main))?;
        let id = cx.f.add_param(Some(&format!("arg{i}")), ty);
        args.push(Val::Ir(id));
    }
    let results = cx.run_block(&block, args, &main)?;
    for r in results {
        let id = cx.materialize(&r).map_err(|p| p.at(&main))?;
        cx.f.results.push(id);
    }
    let n = cx.f.params.len() as i64;
    cx.f.attrs.insert("num_input".into(), Attr::Int(n));
    let dialects: Vec<String> = cx.dialects.into_iter().collect();
    Ok((cx.f, dialects.join(",")))
}

impl<'f, 'c, 'a> Cx<'f, 'c, 'a> {
    /// Converts the ops of `block` with its arguments bound to `args`; returns the operands of
    /// its terminator (`func.return` / `stablehlo.return`).
    fn run_block(
        &mut self,
        block: &BlockRef<'c, 'a>,
        args: Vec<Val>,
        owner: &OperationRef<'c, 'a>,
    ) -> PResult<Vec<Val>> {
        if block.argument_count() != args.len() {
            return Err(Problem::msg(format!(
                "takes {} arguments, called with {}",
                block.argument_count(),
                args.len()
            ))
            .at(owner));
        }
        for (i, a) in args.into_iter().enumerate() {
            let arg = block
                .argument(i)
                .map_err(|e| Problem::msg(e.to_string()).at(owner))?;
            self.env.insert(key(&arg.into()), a);
        }
        let mut op = block.first_operation();
        while let Some(o) = op {
            let name = op_name(&o);
            if name == "func.return" || name == "stablehlo.return" {
                return (0..o.operand_count())
                    .map(|i| self.operand(&o, i))
                    .collect::<PResult<Vec<_>>>()
                    .map_err(|p| p.at(&o));
            }
            let results = self.convert(&o, &name).map_err(|p| p.at(&o))?;
            if results.len() != o.result_count() {
                return Err(Problem::msg(format!(
                    "gave {} results for {}",
                    results.len(),
                    o.result_count()
                ))
                .at(&o));
            }
            for (i, v) in results.into_iter().enumerate() {
                let r = o
                    .result(i)
                    .map_err(|e| Problem::msg(e.to_string()).at(&o))?;
                self.env.insert(key(&r.into()), v);
            }
            op = o.next_in_block();
        }
        Err(Problem::msg("the block has no return").at(owner))
    }

    pub(super) fn operand(&self, op: &OperationRef, i: usize) -> PResult<Val> {
        let v = op
            .operand(i)
            .map_err(|_| Problem::msg(format!("has no operand {i}")))?;
        match self.env.get(&key(&v)) {
            Some(v) => Ok(v.clone()),
            None => bail!("operand {i} is not defined before its use"),
        }
    }

    pub(super) fn operands(&self, op: &OperationRef) -> PResult<Vec<Val>> {
        (0..op.operand_count())
            .map(|i| self.operand(op, i))
            .collect()
    }

    pub(super) fn ty(&self, v: &Val) -> TensorType {
        match v {
            Val::Ir(id) => self.f.ty(*id).clone(),
            Val::Const(c) => c.ty.clone(),
            Val::Bcast { ty, .. } => ty.clone(),
            Val::Shape(v) => TensorType::new(DType::I64, [v.len() as i64]),
        }
    }

    /// The IR value of `v`, emitting what it takes (`constant`, a parameter, `broadcast_to`).
    pub(super) fn materialize(&mut self, v: &Val) -> PResult<ValueId> {
        match v {
            Val::Shape(_) => bail!("a !tosa.shape value is used as a tensor"),
            Val::Ir(id) => Ok(*id),
            Val::Const(c) => {
                let ptr = Rc::as_ptr(c);
                if let Some((_, id)) = self.materialized.get(&ptr) {
                    return Ok(*id);
                }
                let id = match &c.values {
                    Some(values) => {
                        let value = if c.ty.dtype.is_float() {
                            Attr::floats(values.iter().copied())
                        } else {
                            Attr::ints(values.iter().map(|&x| x as i64))
                        };
                        let mut attrs = Attrs::new();
                        attrs.insert("value".into(), value);
                        attrs.insert("shape".into(), Attr::ints(c.ty.shape.iter().copied()));
                        attrs.insert("dtype".into(), Attr::str(c.ty.dtype.tvm_name()));
                        self.emit("constant", &[], attrs)?
                    }
                    None => {
                        let name = format!("const{}", self.next_const_param);
                        self.next_const_param += 1;
                        self.f.add_param(Some(&name), c.ty.clone())
                    }
                };
                self.materialized.insert(ptr, (c.clone(), id));
                Ok(id)
            }
            Val::Bcast { src, ty } => {
                let id = self.materialize(src)?;
                let from = self.f.ty(id);
                if from == ty {
                    return Ok(id);
                }
                let shape = Attr::ints(ty.shape.iter().copied());
                // Only unit dimensions added: a reshape.
                let op = if from.num_elements() == ty.num_elements() {
                    "reshape"
                } else {
                    "broadcast_to"
                };
                self.emit(op, &[id], attrs(&[("shape", shape)]))
            }
        }
    }

    pub(super) fn emit(
        &mut self,
        op: &str,
        operands: &[ValueId],
        attrs: Attrs,
    ) -> PResult<ValueId> {
        self.f
            .push_op1(op, operands, attrs)
            .map_err(|e| Problem::msg(e.to_string()))
    }

    pub(super) fn emit_vals(&mut self, op: &str, operands: &[Val], attrs: Attrs) -> PResult<Val> {
        let ids = operands
            .iter()
            .map(|v| self.materialize(v))
            .collect::<PResult<Vec<_>>>()?;
        Ok(Val::Ir(self.emit(op, &ids, attrs)?))
    }

    fn convert(&mut self, op: &OperationRef<'c, 'a>, name: &str) -> PResult<Vec<Val>> {
        if let Some((dialect, _)) = name.split_once('.') {
            if ["stablehlo", "chlo", "tosa"].contains(&dialect) && !self.dialects.contains(dialect)
            {
                self.dialects.insert(dialect.to_string());
            }
        }
        let one = |v: PResult<Val>| v.map(|v| vec![v]);
        let Some(short) = name.strip_prefix("stablehlo.") else {
            return match name {
                "func.call" => self.call(op),
                _ if name.starts_with("tosa.") => self.convert_tosa(op, &name["tosa.".len()..]),
                "chlo.square" => {
                    let x = self.operand(op, 0)?;
                    one(self.binary("multiply", x.clone(), x, op))
                }
                "chlo.erf" => {
                    let x = self.operand(op, 0)?;
                    one(self.unary("erf", x, op))
                }
                // erfc(x) = 1 - erf(x)
                "chlo.erfc" => {
                    let x = self.operand(op, 0)?;
                    let erf = self.unary("erf", x, op)?;
                    let one_ = Val::Const(Rc::new(Const {
                        ty: TensorType::scalar(result_type(op, 0)?.dtype),
                        values: Some(vec![1.0]),
                    }));
                    one(self.binary("subtract", one_, erf, op))
                }
                _ => bail!("unsupported op"),
            };
        };
        if let Some(relax) = unary_op(short) {
            let x = self.operand(op, 0)?;
            return one(self.unary(relax, x, op));
        }
        if let Some(relax) = binary_op(short) {
            let (a, b) = (self.operand(op, 0)?, self.operand(op, 1)?);
            return one(self.binary(relax, a, b, op));
        }
        let out = result_type(op, 0);
        match short {
            "constant" => one(constant(op)),
            "convert" => {
                let x = self.operand(op, 0)?;
                let ty = out?;
                match &x {
                    _ if self.ty(&x).dtype == ty.dtype => one(Ok(x)),
                    Val::Const(c) if c.values.is_some() => {
                        let values = c
                            .values
                            .clone()
                            .map(|v| v.into_iter().map(|x| cast(x, ty.dtype)).collect::<Vec<_>>());
                        one(Ok(Val::Const(Rc::new(Const { ty, values }))))
                    }
                    _ => {
                        let dtype = Attr::str(ty.dtype.tvm_name());
                        one(self.elementwise("astype", &[x], attrs(&[("dtype", dtype)]), &ty))
                    }
                }
            }
            "compare" => {
                let dir = opaque_word(op, "comparison_direction")?;
                let relax = match dir.as_str() {
                    "EQ" => "equal",
                    "NE" => "not_equal",
                    "LT" => "less",
                    "LE" => "less_equal",
                    "GT" => "greater",
                    "GE" => "greater_equal",
                    _ => bail!("comparison direction '{dir}' is not supported"),
                };
                let (a, b) = (self.operand(op, 0)?, self.operand(op, 1)?);
                one(self.binary(relax, a, b, op))
            }
            "select" => {
                let ops = self.operands(op)?;
                let ty = out?;
                // A constant condition picks one side.
                if let Val::Const(c) = peel(&ops[0]) {
                    if let Some(cond) = c.splat() {
                        let side = if cond != 0.0 { &ops[1] } else { &ops[2] };
                        if self.ty(side) == ty {
                            return one(Ok(side.clone()));
                        }
                    }
                }
                one(self.elementwise("where", &ops, Attrs::new(), &ty))
            }
            "clamp" => {
                let ops = self.operands(op)?;
                let ty = out?;
                let bound = |v: &Val| match v {
                    Val::Const(c) => c.splat(),
                    Val::Bcast { src, .. } => match &**src {
                        Val::Const(c) => c.splat(),
                        _ => None,
                    },
                    _ => None,
                };
                match (bound(&ops[0]), bound(&ops[2])) {
                    (Some(lo), Some(hi)) if ty.dtype.is_float() => one(self.emit_vals(
                        "clip",
                        &[ops[1].clone()],
                        attrs(&[("min", Attr::Float(lo)), ("max", Attr::Float(hi))]),
                    )),
                    _ => {
                        let lower = self.binary("maximum", ops[1].clone(), ops[0].clone(), op)?;
                        one(self.binary("minimum", lower, ops[2].clone(), op))
                    }
                }
            }
            "reshape" => {
                let x = self.operand(op, 0)?;
                let ty = out?;
                one(self.reshape(x, &ty))
            }
            "broadcast_in_dim" => {
                let x = self.operand(op, 0)?;
                let dims = i64_array(op, "broadcast_dimensions")?;
                one(self.broadcast_in_dim(x, &dims, out?))
            }
            "transpose" => {
                let x = self.operand(op, 0)?;
                let perm = i64_array(op, "permutation")?;
                one(self.emit_vals("permute_dims", &[x], attrs(&[("axes", Attr::ints(perm))])))
            }
            "concatenate" => {
                let ops = self.operands(op)?;
                let axis = int_attr(op, "dimension")?;
                one(self.emit_vals("concat", &ops, attrs(&[("axis", Attr::Int(axis))])))
            }
            "slice" => {
                let x = self.operand(op, 0)?;
                let rank = self.ty(&x).rank() as i64;
                let a = attrs(&[
                    ("axes", Attr::ints(0..rank)),
                    ("begin", Attr::ints(i64_array(op, "start_indices")?)),
                    ("end", Attr::ints(i64_array(op, "limit_indices")?)),
                    ("strides", Attr::ints(i64_array(op, "strides")?)),
                ]);
                one(self.emit_vals("strided_slice", &[x], a))
            }
            "pad" => one(self.pad(op)),
            "batch_norm_inference" => one(self.batch_norm(op)),
            "convolution" => one(self.convolution(op)),
            "dot_general" => one(self.dot_general(op, out?)),
            "reduce" => one(self.reduce(op)),
            "reduce_window" => one(self.reduce_window(op)),
            _ => bail!("unsupported op"),
        }
    }

    /// `func.call @callee(...)`: the callee's body, inlined.
    fn call(&mut self, op: &OperationRef<'c, 'a>) -> PResult<Vec<Val>> {
        let callee = op
            .inherent_attribute("callee")
            .or_else(|_| op.attribute("callee"))
            .map_err(|_| Problem::msg("has no callee"))?
            .to_string();
        let callee = callee.trim_start_matches('@').trim_matches('"').to_string();
        let Some(&f) = self.funcs.get(&callee) else {
            bail!("calls @{callee}, which the module does not define");
        };
        if self.depth == MAX_CALL_DEPTH {
            bail!("calls nest deeper than {MAX_CALL_DEPTH} (a recursive module?)");
        }
        let args = self.operands(op)?;
        let block = body_block(&f).ok_or_else(|| Problem::msg("has no body").at(&f))?;
        self.depth += 1;
        let r = self.run_block(&block, args, &f);
        self.depth -= 1;
        r
    }

    pub(super) fn unary(&mut self, relax: &str, x: Val, op: &OperationRef) -> PResult<Val> {
        if let Val::Const(c) = &x {
            if let Some(values) = &c.values {
                let folded = match relax {
                    "negative" => Some(values.iter().map(|v| -v).collect()),
                    "rsqrt" => Some(values.iter().map(|v| 1.0 / v.sqrt()).collect()),
                    "sqrt" => Some(values.iter().map(|v| v.sqrt()).collect()),
                    "exp" => Some(values.iter().map(|v| v.exp()).collect()),
                    _ => None,
                };
                if let Some(values) = folded {
                    let ty = result_type(op, 0)?;
                    return Ok(Val::Const(Rc::new(Const {
                        ty,
                        values: Some(values),
                    })));
                }
            }
        }
        self.elementwise(relax, &[x], Attrs::new(), &result_type(op, 0)?)
    }

    /// An elementwise op of result type `ty` on the operands' broadcast sources (see
    /// [`Cx::peel_all`]): computed at the sources' broadcast shape, the result itself a
    /// broadcast where that shape is smaller than `ty`'s (a bias computed once per channel,
    /// not once per pixel).
    pub(super) fn elementwise(
        &mut self,
        relax: &str,
        vals: &[Val],
        a: Attrs,
        ty: &TensorType,
    ) -> PResult<Val> {
        let peeled: Vec<Val> = vals.iter().map(peel).collect();
        let shapes: Vec<Vec<i64>> = peeled.iter().map(|v| self.ty(v).shape.to_vec()).collect();
        match broadcast_shapes(&shapes) {
            Some(s) if aligns(&s, &ty.shape) => {
                let v = self.emit_vals(relax, &peeled, a)?;
                if s == ty.shape.to_vec() {
                    Ok(v)
                } else {
                    Ok(Val::Bcast {
                        src: Box::new(v),
                        ty: ty.clone(),
                    })
                }
            }
            _ => {
                let operands = self.peel_all(vals, ty);
                self.emit_vals(relax, &operands, a)
            }
        }
    }

    /// `relax(a, b)` with `a`, `b` of the result's shape: broadcasts folded into the operands
    /// where numpy broadcasting gives the same.
    pub(super) fn binary(
        &mut self,
        relax: &str,
        a: Val,
        b: Val,
        op: &OperationRef,
    ) -> PResult<Val> {
        let ty = result_type(op, 0)?;
        let (a, b) = (peel(&a), peel(&b));
        if let (Val::Const(ca), Val::Const(cb)) = (&a, &b) {
            if let Some(v) = fold_binary(relax, ca, cb, &ty) {
                return Ok(Val::Const(Rc::new(v)));
            }
        }
        if relax == "maximum" && ty.dtype.is_float() {
            let zero = |v: &Val| matches!(v, Val::Const(c) if c.splat() == Some(0.0));
            for (x, other) in [(&a, &b), (&b, &a)] {
                if zero(other) && aligns(&self.ty(x).shape, &ty.shape) {
                    return self.elementwise("nn.relu", std::slice::from_ref(x), Attrs::new(), &ty);
                }
            }
        }
        self.elementwise(relax, &[a, b], Attrs::new(), &ty)
    }

    /// The operands of an elementwise op of result type `ty`, each broadcast replaced by its
    /// source and each splat constant by a scalar, where numpy broadcasting of the results
    /// still gives `ty`'s shape.
    fn peel_all(&self, vals: &[Val], ty: &TensorType) -> Vec<Val> {
        let peeled: Vec<Val> = vals.iter().map(peel).collect();
        let shapes: Vec<Vec<i64>> = peeled.iter().map(|v| self.ty(v).shape.to_vec()).collect();
        if broadcast_shapes(&shapes).as_deref() == Some(&ty.shape[..]) {
            return peeled;
        }
        // Peel all but the first operand that needs its full shape.
        let mut out = vals.to_vec();
        for i in 0..vals.len() {
            let mut trial = out.clone();
            trial[i] = peeled[i].clone();
            let shapes: Vec<Vec<i64>> = trial.iter().map(|v| self.ty(v).shape.to_vec()).collect();
            if broadcast_shapes(&shapes).as_deref() == Some(&ty.shape[..]) {
                out = trial;
            }
        }
        out
    }

    pub(super) fn reshape(&mut self, x: Val, ty: &TensorType) -> PResult<Val> {
        if self.ty(&x).shape == ty.shape {
            return Ok(x);
        }
        // Adding or dropping leading unit dimensions is what numpy broadcasting does anyway:
        // a broadcast, made a reshape only where a consumer needs the shape.
        let base = match &x {
            Val::Bcast { src, ty: t } if self.ty(src).num_elements() == t.num_elements() => {
                (**src).clone()
            }
            _ => x.clone(),
        };
        let strip = |s: &[i64]| {
            s.iter()
                .skip_while(|&&d| d == 1)
                .copied()
                .collect::<Vec<_>>()
        };
        if !matches!(base, Val::Const(_)) && strip(&self.ty(&base).shape) == strip(&ty.shape) {
            if self.ty(&base).shape == ty.shape {
                return Ok(base);
            }
            if self.ty(&base).rank() <= ty.rank() {
                return Ok(Val::Bcast {
                    src: Box::new(base),
                    ty: ty.clone(),
                });
            }
        }
        if let Val::Const(c) = &x {
            return Ok(Val::Const(Rc::new(Const {
                ty: ty.clone(),
                values: c.values.clone(),
            })));
        }
        let shape = Attr::ints(ty.shape.iter().copied());
        self.emit_vals("reshape", &[x], attrs(&[("shape", shape)]))
    }

    fn broadcast_in_dim(&mut self, x: Val, dims: &[i64], ty: TensorType) -> PResult<Val> {
        let xty = self.ty(&x);
        let r = ty.rank();
        if dims.len() != xty.rank() || dims.iter().any(|&d| d < 0 || d as usize >= r) {
            bail!(
                "broadcast_dimensions {dims:?} do not fit {} into {}",
                xty,
                ty
            );
        }
        if let Val::Const(c) = &x {
            if let Some(s) = c.splat() {
                return Ok(Val::Const(Rc::new(Const {
                    ty,
                    values: Some(vec![s]),
                })));
            }
        }
        // Operand dimensions in increasing target order.
        let mut order: Vec<usize> = (0..dims.len()).collect();
        order.sort_by_key(|&i| dims[i]);
        let mut x = x;
        let sorted: Vec<i64> = order.iter().map(|&i| dims[i]).collect();
        if order.iter().enumerate().any(|(i, &o)| i != o) {
            let axes = Attr::ints(order.iter().map(|&i| i as i64));
            x = self.emit_vals("permute_dims", &[x], attrs(&[("axes", axes)]))?;
        }
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            bail!("broadcast_dimensions {dims:?} repeat a dimension");
        }
        let xshape = self.ty(&x).shape.to_vec();
        // Numpy aligns at the right: operand dim j lands on r - rank + j.
        let offset = r - xshape.len();
        let aligned = xshape
            .iter()
            .enumerate()
            .all(|(j, &n)| n == 1 || sorted[j] as usize == offset + j);
        if !aligned {
            let mut shape = vec![1i64; r];
            for (j, &d) in sorted.iter().enumerate() {
                shape[d as usize] = xshape[j];
            }
            x = self.reshape(x, &ty.with_shape(shape))?;
        }
        if self.ty(&x).shape == ty.shape {
            return Ok(x);
        }
        // A broadcast of a broadcast, both aligned at the right: one broadcast.
        if let Val::Bcast { src, .. } = x {
            x = *src;
        }
        Ok(Val::Bcast {
            src: Box::new(x),
            ty,
        })
    }

    /// Inference batch norm, decomposed as TVM's `DecomposeOpsForInference` does (and the
    /// ONNX frontend): the statistics and affine parameters expanded to the operand's rank
    /// along `feature_index`, then `(x - mean) / sqrt(var + eps) * scale + offset`.
    fn batch_norm(&mut self, op: &OperationRef) -> PResult<Val> {
        let ops = self.operands(op)?;
        if ops.len() != 5 {
            bail!(
                "expects 5 operands (operand, scale, offset, mean, variance), got {}",
                ops.len()
            );
        }
        let ty = result_type(op, 0)?;
        let rank = ty.rank() as i64;
        let feature = int_attr(op, "feature_index")?;
        if !(0..rank).contains(&feature) {
            bail!("feature_index {feature} is out of range for rank {rank}");
        }
        let eps = op
            .inherent_attribute("epsilon")
            .ok()
            .and_then(|a| melior::ir::attribute::FloatAttribute::try_from(a).ok())
            .map(|f| f.value())
            .ok_or_else(|| Problem::msg("has no float attribute 'epsilon'"))?;
        let axes = Attr::ints((0..rank).filter(|&a| a != feature));
        let expand = |cx: &mut Self, v: &Val| {
            cx.emit_vals(
                "expand_dims",
                std::slice::from_ref(v),
                attrs(&[("axis", axes.clone())]),
            )
        };
        let (x, scale, offset, mean, var) = (&ops[0], &ops[1], &ops[2], &ops[3], &ops[4]);
        let mean = expand(self, mean)?;
        let var = expand(self, var)?;
        let eps = Val::Const(Rc::new(Const {
            ty: TensorType::scalar(ty.dtype),
            values: Some(vec![cast(eps, ty.dtype)]),
        }));
        let var_eps = self.emit_vals("add", &[var, eps], Attrs::new())?;
        let std = self.emit_vals("sqrt", &[var_eps], Attrs::new())?;
        let centered = self.emit_vals("subtract", &[x.clone(), mean], Attrs::new())?;
        let normed = self.emit_vals("divide", &[centered, std], Attrs::new())?;
        let scale = expand(self, scale)?;
        let scaled = self.emit_vals("multiply", &[normed, scale], Attrs::new())?;
        let offset = expand(self, offset)?;
        self.emit_vals("add", &[scaled, offset], Attrs::new())
    }

    fn pad(&mut self, op: &OperationRef) -> PResult<Val> {
        let x = self.operand(op, 0)?;
        let value = match self.operand(op, 1)? {
            Val::Const(c) => c.splat(),
            _ => None,
        };
        let Some(value) = value else {
            bail!("the padding value must be a constant");
        };
        let low = i64_array(op, "edge_padding_low")?;
        let high = i64_array(op, "edge_padding_high")?;
        let interior = i64_array(op, "interior_padding")?;
        if interior.iter().any(|&i| i != 0) {
            bail!("interior padding {interior:?} is not supported");
        }
        if low.iter().chain(&high).any(|&p| p < 0) {
            bail!("negative padding (low {low:?}, high {high:?}) is not supported");
        }
        let widths: Vec<i64> = low.iter().zip(&high).flat_map(|(&l, &h)| [l, h]).collect();
        let a = attrs(&[
            ("pad_width", Attr::ints(widths)),
            ("pad_value", Attr::Float(value)),
        ]);
        self.emit_vals("nn.pad", &[x], a)
    }

    fn convolution(&mut self, op: &OperationRef) -> PResult<Val> {
        let x = self.operand(op, 0)?;
        let w = self.operand(op, 1)?;
        let dn = op
            .inherent_attribute("dimension_numbers")
            .map_err(|_| Problem::msg("has no dimension_numbers"))?
            .to_string();
        let (data_layout, kernel_layout, out_layout) = conv_layouts(&dn)?;
        let strides = i64_array_or(op, "window_strides", vec![1, 1])?;
        let rhs_dilation = i64_array_or(op, "rhs_dilation", vec![1, 1])?;
        let lhs_dilation = i64_array_or(op, "lhs_dilation", vec![1, 1])?;
        if lhs_dilation.iter().any(|&d| d != 1) {
            bail!("lhs_dilation {lhs_dilation:?} (a transposed convolution) is not supported");
        }
        if let Ok(rev) = op.inherent_attribute("window_reversal") {
            if rev.to_string().contains("true") {
                bail!("window_reversal is not supported");
            }
        }
        let batch_groups = int_attr_or(op, "batch_group_count", 1)?;
        if batch_groups != 1 {
            bail!("batch_group_count {batch_groups} is not supported");
        }
        let groups = int_attr_or(op, "feature_group_count", 1)?;
        let pads = match op.inherent_attribute("padding") {
            Ok(a) => dense_ints(a, "padding")?,
            Err(_) => vec![0; 4],
        };
        let pads = match pads.len() {
            1 => vec![pads[0]; 4],
            4 => pads,
            _ => bail!("padding {pads:?} is not 2x2"),
        };
        // StableHLO: [[top, bottom], [left, right]]; Relax: [top, left, bottom, right].
        let padding = vec![pads[0], pads[2], pads[1], pads[3]];
        if padding.iter().any(|&p| p < 0) {
            bail!("negative padding {padding:?} is not supported");
        }
        let mut a = attrs(&[
            ("strides", Attr::ints(strides)),
            ("padding", Attr::ints(padding)),
            ("dilation", Attr::ints(rhs_dilation)),
            ("groups", Attr::Int(groups)),
            ("data_layout", Attr::str(&data_layout)),
            ("kernel_layout", Attr::str(kernel_layout)),
        ]);
        if out_layout != data_layout {
            a.insert("out_layout".into(), Attr::str(out_layout));
        }
        self.emit_vals("nn.conv2d", &[x, w], a)
    }

    fn dot_general(&mut self, op: &OperationRef, ty: TensorType) -> PResult<Val> {
        let lhs = self.operand(op, 0)?;
        let rhs = self.operand(op, 1)?;
        let dn = op
            .inherent_attribute("dot_dimension_numbers")
            .map_err(|_| Problem::msg("has no dot_dimension_numbers"))?
            .to_string();
        let list = |k: &str| dot_dims(&dn, k);
        let (lb, rb) = (
            list("lhs_batching_dimensions")?,
            list("rhs_batching_dimensions")?,
        );
        let (lc, rc) = (
            list("lhs_contracting_dimensions")?,
            list("rhs_contracting_dimensions")?,
        );
        let (lt, rt) = (self.ty(&lhs), self.ty(&rhs));
        let (lr, rr) = (lt.rank() as i64, rt.rank() as i64);
        if lb.len() != rb.len() || lc.len() != rc.len() {
            bail!("dot_dimension_numbers {dn} pair unequal numbers of dimensions");
        }
        let lf: Vec<i64> = (0..lr)
            .filter(|d| !lb.contains(d) && !lc.contains(d))
            .collect();
        let rf: Vec<i64> = (0..rr)
            .filter(|d| !rb.contains(d) && !rc.contains(d))
            .collect();
        // Numpy matmul as it is: [..., M, K] x [K, N], or [B..., M, K] x [B..., K, N].
        let plain = lc.len() == 1
            && lc[0] == lr - 1
            && lf.len() == (lr - 1 - lb.len() as i64) as usize
            && lb.iter().enumerate().all(|(i, &d)| d == i as i64)
            && rb.iter().enumerate().all(|(i, &d)| d == i as i64)
            && rc.len() == 1
            && rr == rb.len() as i64 + 2
            && rc[0] == rr - 2
            && (lb.is_empty() || lf.len() == 1);
        if plain {
            let v = self.emit_vals("matmul", &[lhs, rhs], Attrs::new())?;
            return self.reshape(v, &ty);
        }
        // Canonical: lhs [B..., M, K], rhs [B..., K, N].
        let dim =
            |t: &TensorType, ds: &[i64]| ds.iter().map(|&d| t.shape[d as usize]).product::<i64>();
        let batch: Vec<i64> = lb.iter().map(|&d| lt.shape[d as usize]).collect();
        let (m, k, n) = (dim(&lt, &lf), dim(&lt, &lc), dim(&rt, &rf));
        let lperm: Vec<i64> = lb.iter().chain(&lf).chain(&lc).copied().collect();
        let rperm: Vec<i64> = rb.iter().chain(&rc).chain(&rf).copied().collect();
        let lhs = self.permuted(lhs, &lperm)?;
        let rhs = self.permuted(rhs, &rperm)?;
        let shape = |a: i64, b: i64| batch.iter().copied().chain([a, b]).collect::<Vec<_>>();
        let lhs = self.reshape(lhs, &lt.with_shape(shape(m, k)))?;
        let rhs = self.reshape(rhs, &rt.with_shape(shape(k, n)))?;
        let v = self.emit_vals("matmul", &[lhs, rhs], Attrs::new())?;
        self.reshape(v, &ty)
    }

    fn permuted(&mut self, x: Val, perm: &[i64]) -> PResult<Val> {
        if perm.iter().enumerate().all(|(i, &p)| p == i as i64) {
            return Ok(x);
        }
        let axes = Attr::ints(perm.iter().copied());
        self.emit_vals("permute_dims", &[x], attrs(&[("axes", axes)]))
    }

    /// The reducer of a `reduce`/`reduce_window` body: the StableHLO op applied to its two
    /// block arguments.
    fn reducer(&self, op: &OperationRef) -> PResult<String> {
        let block = body_block(op).ok_or_else(|| Problem::msg("has no reducer body"))?;
        let first = block
            .first_operation()
            .ok_or_else(|| Problem::msg("has an empty reducer body"))?;
        let next = first.next_in_block().map(|o| op_name(&o));
        if block.argument_count() != 2 || next.as_deref() != Some("stablehlo.return") {
            bail!("the reducer body must be one binary op on its two arguments");
        }
        Ok(op_name(&first))
    }

    /// The init value of a reduction: a constant equal to the reducer's identity.
    fn check_init(&self, op: &OperationRef, reducer: &str) -> PResult<()> {
        let init = match self.operand(op, 1)? {
            Val::Const(c) => c.splat(),
            _ => None,
        };
        let ok = match (reducer, init) {
            ("add", Some(v)) => v == 0.0,
            ("multiply", Some(v)) => v == 1.0,
            ("maximum", Some(v)) => v == f64::NEG_INFINITY || v <= f32::MIN as f64,
            ("minimum", Some(v)) => v == f64::INFINITY || v >= f32::MAX as f64,
            _ => false,
        };
        if !ok {
            bail!("the init value {init:?} is not the identity of {reducer}");
        }
        Ok(())
    }

    fn reduce(&mut self, op: &OperationRef) -> PResult<Val> {
        if op.operand_count() != 2 {
            bail!("a reduce of several operands is not supported");
        }
        let reducer = self.reducer(op)?;
        let short = reducer.trim_start_matches("stablehlo.");
        let relax = match short {
            "add" => "sum",
            "maximum" => "max",
            "minimum" => "min",
            "multiply" => "prod",
            _ => bail!("a reduce with body {reducer} is not supported"),
        };
        self.check_init(op, short)?;
        let x = self.operand(op, 0)?;
        let axes = Attr::ints(i64_array(op, "dimensions")?);
        self.emit_vals(
            relax,
            &[x],
            attrs(&[("axis", axes), ("keepdims", Attr::Bool(false))]),
        )
    }

    fn reduce_window(&mut self, op: &OperationRef) -> PResult<Val> {
        if op.operand_count() != 2 {
            bail!("a reduce_window of several operands is not supported");
        }
        let reducer = self.reducer(op)?;
        let short = reducer.trim_start_matches("stablehlo.");
        if short != "maximum" {
            bail!("a reduce_window with body {reducer} is not supported (max pooling only)");
        }
        self.check_init(op, short)?;
        let x = self.operand(op, 0)?;
        let rank = self.ty(&x).rank();
        let window = i64_array(op, "window_dimensions")?;
        let strides = i64_array_or(op, "window_strides", vec![1; rank])?;
        let dilations = i64_array_or(op, "window_dilations", vec![1; rank])?;
        let base = i64_array_or(op, "base_dilations", vec![1; rank])?;
        let pads = match op.inherent_attribute("padding") {
            Ok(a) => dense_ints(a, "padding")?,
            Err(_) => vec![0],
        };
        let pads = if pads.len() == 1 {
            vec![pads[0]; 2 * rank]
        } else {
            pads
        };
        if rank != 4 || window.len() != 4 || strides.len() != 4 || pads.len() != 8 {
            bail!("only 2-D pooling of a rank-4 tensor is supported");
        }
        if base.iter().any(|&b| b != 1) {
            bail!("base_dilations {base:?} are not supported");
        }
        // The two spatial axes are the ones with a window or stride; N and C have neither.
        let spatial: Vec<usize> = (0..4)
            .filter(|&i| {
                window[i] != 1 || strides[i] != 1 || pads[2 * i] != 0 || pads[2 * i + 1] != 0
            })
            .collect();
        let (h, w, layout) = match spatial.as_slice() {
            [1, 2] | [1] | [2] | [] => (1, 2, "NHWC"),
            [2, 3] | [3] => (2, 3, "NCHW"),
            _ => bail!("cannot tell the spatial axes of window {window:?}"),
        };
        let a = attrs(&[
            ("pool_size", Attr::ints([window[h], window[w]])),
            ("strides", Attr::ints([strides[h], strides[w]])),
            (
                "padding",
                Attr::ints([pads[2 * h], pads[2 * w], pads[2 * h + 1], pads[2 * w + 1]]),
            ),
            ("dilation", Attr::ints([dilations[h], dilations[w]])),
            ("layout", Attr::str(layout)),
        ]);
        self.emit_vals("nn.max_pool2d", &[x], a)
    }
}

fn peel(v: &Val) -> Val {
    let v = match v {
        Val::Bcast { src, .. } => (**src).clone(),
        other => other.clone(),
    };
    match &v {
        Val::Const(c) if c.ty.rank() > 0 => match c.splat() {
            Some(s) => Val::Const(Rc::new(Const {
                ty: TensorType::scalar(c.ty.dtype),
                values: Some(vec![s]),
            })),
            None => v,
        },
        _ => v,
    }
}

/// Whether `s` broadcasts numpy-style (aligned at the right) to `t`.
fn aligns(s: &[i64], t: &[i64]) -> bool {
    s.len() <= t.len() && {
        let off = t.len() - s.len();
        s.iter()
            .enumerate()
            .all(|(j, &d)| d == 1 || d == t[off + j])
    }
}

/// Numpy broadcasting of `shapes`, or `None` where they do not broadcast.
fn broadcast_shapes(shapes: &[Vec<i64>]) -> Option<Vec<i64>> {
    let rank = shapes.iter().map(Vec::len).max()?;
    let mut out = vec![1i64; rank];
    for s in shapes {
        let off = rank - s.len();
        for (j, &d) in s.iter().enumerate() {
            let o = &mut out[off + j];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

fn fold_binary(relax: &str, a: &Const, b: &Const, ty: &TensorType) -> Option<Const> {
    let f: fn(f64, f64) -> f64 = match relax {
        "equal" => |x, y| (x == y) as i64 as f64,
        "not_equal" => |x, y| (x != y) as i64 as f64,
        "less" => |x, y| (x < y) as i64 as f64,
        "less_equal" => |x, y| (x <= y) as i64 as f64,
        "greater" => |x, y| (x > y) as i64 as f64,
        "greater_equal" => |x, y| (x >= y) as i64 as f64,
        "add" => |x, y| x + y,
        "subtract" => |x, y| x - y,
        "multiply" => |x, y| x * y,
        "divide" => |x, y| x / y,
        "maximum" => f64::max,
        "minimum" => f64::min,
        _ => return None,
    };
    let values = match (a.splat(), b.splat()) {
        (Some(x), Some(y)) => vec![f(x, y)],
        _ if a.ty.shape == b.ty.shape && ty.shape == a.ty.shape => {
            let (x, y) = (a.expanded()?, b.expanded()?);
            x.iter().zip(&y).map(|(&x, &y)| f(x, y)).collect()
        }
        _ => return None,
    };
    let values = values.into_iter().map(|v| cast(v, ty.dtype)).collect();
    Some(Const {
        ty: ty.clone(),
        values: Some(values),
    })
}

/// `x` as a value of `dtype` (integers truncate toward zero, as a conversion does).
fn cast(x: f64, dtype: DType) -> f64 {
    if dtype == DType::Bool {
        (x != 0.0) as i64 as f64
    } else if dtype.is_float() {
        if dtype == DType::F32 {
            x as f32 as f64
        } else {
            x
        }
    } else {
        x.trunc()
    }
}

pub(super) fn attrs(items: &[(&str, Attr)]) -> Attrs {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn unary_op(short: &str) -> Option<&'static str> {
    Some(match short {
        "negate" => "negative",
        "abs" => "abs",
        "exponential" => "exp",
        "log" => "log",
        "sqrt" => "sqrt",
        "rsqrt" => "rsqrt",
        "tanh" => "tanh",
        "logistic" => "sigmoid",
        "floor" => "floor",
        "ceil" => "ceil",
        "round_nearest_even" => "round",
        "sine" => "sin",
        "cosine" => "cos",
        _ => return None,
    })
}

fn binary_op(short: &str) -> Option<&'static str> {
    Some(match short {
        "add" => "add",
        "subtract" => "subtract",
        "multiply" => "multiply",
        "divide" => "divide",
        "maximum" => "maximum",
        "minimum" => "minimum",
        "power" => "power",
        _ => return None,
    })
}

/// The type of result `i`: a static ranked tensor.
pub(super) fn result_type(op: &OperationRef, i: usize) -> PResult<TensorType> {
    let r = op
        .result(i)
        .map_err(|_| Problem::msg(format!("has no result {i}")))?;
    tensor_type(&r.r#type().to_string()).map_err(|m| Problem::msg(format!("result {i}: {m}")))
}

/// Parses `tensor<1x224x224x3xf32>` (static shape, no encoding).
pub(super) fn tensor_type(text: &str) -> Result<TensorType, String> {
    let Some(inner) = text
        .strip_prefix("tensor<")
        .and_then(|t| t.strip_suffix('>'))
    else {
        return Err(format!("type {text} is not a ranked tensor"));
    };
    if inner.contains(',') {
        return Err(format!(
            "type {text} has an encoding, which is not supported"
        ));
    }
    let parts: Vec<&str> = inner.split('x').collect();
    let (elem, dims) = parts.split_last().expect("split gives one part at least");
    if dims.contains(&"?") || inner.starts_with('*') {
        return Err(format!(
            "type {text} has a dynamic dimension; tgc needs static shapes (export with concrete input shapes)"
        ));
    }
    let dtype = match *elem {
        "ui8" => DType::U8,
        "ui16" => DType::U16,
        "ui32" => DType::U32,
        "ui64" => DType::U64,
        e => DType::from_short_name(e)
            .ok_or_else(|| format!("element type {e} of {text} is not supported"))?,
    };
    let shape = dims
        .iter()
        .map(|d| {
            d.parse::<i64>()
                .map_err(|_| format!("dimension '{d}' of {text} is not a number"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TensorType::new(dtype, shape))
}

fn constant(op: &OperationRef) -> PResult<Val> {
    constant_named(op, "value")
}

/// A constant op whose dense elements are its attribute `name`.
pub(super) fn constant_named(op: &OperationRef, name: &str) -> PResult<Val> {
    let ty = result_type(op, 0)?;
    let a = op
        .inherent_attribute(name)
        .map_err(|_| Problem::msg(format!("has no attribute '{name}'")))?;
    let values = if ty.num_elements() <= MAX_CONST_ELEMENTS || is_splat(a) {
        Some(dense_values(a, &ty)?)
    } else {
        None
    };
    Ok(Val::Const(Rc::new(Const { ty, values })))
}

fn is_splat(a: Attribute) -> bool {
    DenseElementsAttribute::try_from(a).is_ok_and(|d| d.is_splat())
}

/// The values of a dense elements attribute (one for a splat).
fn dense_values(a: Attribute, ty: &TensorType) -> PResult<Vec<f64>> {
    let d = DenseElementsAttribute::try_from(a)
        .map_err(|_| Problem::msg(format!("value {} is not a dense elements attribute", a)))?;
    let n = if d.is_splat() { 1 } else { d.len() };
    let bad = |e: melior::Error| Problem::msg(format!("cannot read value {}: {e}", a));
    (0..n)
        .map(|i| {
            Ok(match ty.dtype {
                DType::F32 => d.f32_element(i).map_err(bad)? as f64,
                DType::F64 => d.f64_element(i).map_err(bad)?,
                DType::Bool => d.bool_element(i).map_err(bad)? as i64 as f64,
                DType::I8 => d.i8_element(i).map_err(bad)? as f64,
                DType::I16 => d.i16_element(i).map_err(bad)? as f64,
                DType::I32 => d.i32_element(i).map_err(bad)? as f64,
                DType::I64 => d.i64_element(i).map_err(bad)? as f64,
                DType::U8 => d.u8_element(i).map_err(bad)? as f64,
                DType::U16 => d.u16_element(i).map_err(bad)? as f64,
                DType::U32 => d.u32_element(i).map_err(bad)? as f64,
                DType::U64 => d.u64_element(i).map_err(bad)? as f64,
                DType::F16 | DType::BF16 => {
                    bail!("constants of {} are not read", ty.dtype.short_name())
                }
            })
        })
        .collect()
}

/// Integers of a dense elements attribute (`padding = dense<[[3, 3], [3, 3]]>`).
fn dense_ints(a: Attribute, name: &str) -> PResult<Vec<i64>> {
    let d = DenseElementsAttribute::try_from(a)
        .map_err(|_| Problem::msg(format!("attribute '{name}' = {a} is not dense integers")))?;
    let n = if d.is_splat() { 1 } else { d.len() };
    (0..n)
        .map(|i| {
            d.i64_element(i)
                .map_err(|e| Problem::msg(format!("attribute '{name}' = {a}: {e}")))
        })
        .collect()
}

pub(super) fn i64_array(op: &OperationRef, name: &str) -> PResult<Vec<i64>> {
    let a = op
        .inherent_attribute(name)
        .map_err(|_| Problem::msg(format!("has no attribute '{name}'")))?;
    let arr = DenseI64ArrayAttribute::try_from(a)
        .map_err(|_| Problem::msg(format!("attribute '{name}' = {a} is not array<i64>")))?;
    (0..arr.len())
        .map(|i| arr.element(i).map_err(|e| Problem::msg(e.to_string())))
        .collect()
}

fn i64_array_or(op: &OperationRef, name: &str, default: Vec<i64>) -> PResult<Vec<i64>> {
    if op.inherent_attribute(name).is_ok() {
        i64_array(op, name)
    } else {
        Ok(default)
    }
}

pub(super) fn int_attr(op: &OperationRef, name: &str) -> PResult<i64> {
    let a = op
        .inherent_attribute(name)
        .map_err(|_| Problem::msg(format!("has no attribute '{name}'")))?;
    IntegerAttribute::try_from(a)
        .map(|i| i.value())
        .map_err(|_| Problem::msg(format!("attribute '{name}' = {a} is not an integer")))
}

fn int_attr_or(op: &OperationRef, name: &str, default: i64) -> PResult<i64> {
    if op.inherent_attribute(name).is_ok() {
        int_attr(op, name)
    } else {
        Ok(default)
    }
}

/// The last word of an opaque enum attribute (`#stablehlo<comparison_direction GT>`).
fn opaque_word(op: &OperationRef, name: &str) -> PResult<String> {
    let text = op
        .inherent_attribute(name)
        .map_err(|_| Problem::msg(format!("has no attribute '{name}'")))?
        .to_string();
    let word = text
        .trim_end_matches('>')
        .rsplit([' ', '<'])
        .next()
        .unwrap_or_default();
    Ok(word.to_string())
}

/// Layouts of `#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`: data, kernel and
/// output as Relax layout strings (`NHWC`, `HWIO`, `NHWC`).
fn conv_layouts(text: &str) -> PResult<(String, String, String)> {
    let bad = || {
        Problem::msg(format!(
            "dimension_numbers {text} are not of the form [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
        ))
    };
    let inner = text
        .strip_prefix("#stablehlo.conv<")
        .and_then(|t| t.strip_suffix('>'))
        .ok_or_else(bad)?;
    let (lhs, rest) = inner.split_once('x').ok_or_else(bad)?;
    let (rhs, out) = rest.split_once("->").ok_or_else(bad)?;
    let layout = |part: &str, letters: &[(&str, char)]| -> PResult<String> {
        let dims: Vec<&str> = part
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(str::trim)
            .collect();
        if dims.len() != 4 {
            bail!("only 2-D convolutions are supported (dimension_numbers {text})");
        }
        dims.iter()
            .map(|d| {
                letters
                    .iter()
                    .find(|(k, _)| k == d)
                    .map(|(_, c)| *c)
                    .ok_or_else(bad)
            })
            .collect()
    };
    let act = [("b", 'N'), ("f", 'C'), ("0", 'H'), ("1", 'W')];
    let ker = [("o", 'O'), ("i", 'I'), ("0", 'H'), ("1", 'W')];
    Ok((layout(lhs, &act)?, layout(rhs, &ker)?, layout(out, &act)?))
}

/// A list of `#stablehlo.dot<lhs_batching_dimensions = [0], ...>` (empty when absent).
fn dot_dims(text: &str, key: &str) -> PResult<Vec<i64>> {
    let Some(start) = text.find(&format!("{key} = [")) else {
        return Ok(Vec::new());
    };
    let rest = &text[start + key.len() + 4..];
    let Some(end) = rest.find(']') else {
        bail!("dot_dimension_numbers {text} are malformed");
    };
    rest[..end]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| Problem::msg(format!("dot_dimension_numbers {text} are malformed")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_layouts_of_jax_nhwc_and_nchw() {
        let (d, k, o) =
            conv_layouts("#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>").unwrap();
        assert_eq!(
            (d.as_str(), k.as_str(), o.as_str()),
            ("NHWC", "HWIO", "NHWC")
        );
        let (d, k, _) =
            conv_layouts("#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>").unwrap();
        assert_eq!((d.as_str(), k.as_str()), ("NCHW", "OIHW"));
        let e = conv_layouts("#stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>").unwrap_err();
        assert!(e.message.contains("only 2-D"), "{}", e.message);
    }

    #[test]
    fn dot_dims_reads_each_list() {
        let t = "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], \
                 lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>";
        assert_eq!(dot_dims(t, "lhs_batching_dimensions").unwrap(), vec![0]);
        assert_eq!(dot_dims(t, "rhs_contracting_dimensions").unwrap(), vec![1]);
        let t =
            "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>";
        assert!(dot_dims(t, "lhs_batching_dimensions").unwrap().is_empty());
    }

    #[test]
    fn tensor_types_static_only() {
        let t = tensor_type("tensor<1x224x224x3xf32>").unwrap();
        assert_eq!(t.shape.to_vec(), vec![1, 224, 224, 3]);
        assert_eq!(tensor_type("tensor<i1>").unwrap().dtype, DType::Bool);
        assert!(tensor_type("tensor<?x3xf32>")
            .unwrap_err()
            .contains("dynamic"));
        assert!(tensor_type("tensor<*xf32>")
            .unwrap_err()
            .contains("dynamic"));
        assert!(tensor_type("memref<3xf32>")
            .unwrap_err()
            .contains("ranked tensor"));
    }

    #[test]
    fn numpy_broadcast_of_shapes() {
        assert_eq!(
            broadcast_shapes(&[vec![1, 7, 7, 64], vec![64]]),
            Some(vec![1, 7, 7, 64])
        );
        assert_eq!(broadcast_shapes(&[vec![3, 4], vec![5]]), None);
        assert_eq!(
            broadcast_shapes(&[vec![2, 1], vec![1, 3]]),
            Some(vec![2, 3])
        );
    }
}
