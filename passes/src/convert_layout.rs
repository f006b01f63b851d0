//! Layout conversion: 2-D convolutions run in NHWC with HWIO kernels, and the transposes
//! that this needs are moved through the ops between convolutions until they cancel.
//!
//! Why: MetaSchedule's CPU search space vectorizes the innermost output loop. In NCHW that
//! loop walks the width of one output channel; in NHWC it walks the output channels, which
//! are contiguous in the output and in an HWIO kernel. On the same budget the NHWC task
//! reaches far higher rates (docs/tuning.md, "Where the time goes against onnxruntime").
//!
//! How: every value is tracked as a permutation of a value of the new function
//! (`v = permute_dims(base, perm)`), and a transpose is emitted only where an op needs the
//! value in another layout than the one it has. So `permute_dims` bindings of the input
//! disappear into the tracking, a model that arrives in NHWC and was transposed to NCHW by
//! its exporter (Keras through tf2onnx) loses that transpose, and the NCHW results of the
//! converted convolutions are only materialized where an op that is not layout-agnostic
//! reads them. Ops that carry a layout through:
//! - one-operand elementwise ops, and the binary ops with numpy broadcasting (an operand of
//!   lower rank is reshaped to the full rank first, then transposed like the others);
//! - `nn.max_pool2d` and `nn.avg_pool2d` (NCHW to NHWC), `nn.pad` (its widths permuted);
//! - the reductions `sum`, `mean`, `max`, `min`, `prod` and `squeeze` (axes mapped).
//!
//! Every `nn.conv2d` with NCHW data and output and an OIHW kernel is converted, grouped and
//! depthwise ones too (an HWIO kernel of a depthwise convolution is `[kh, kw, 1, C]`);
//! other layouts and every other op keep theirs. A kernel that is an entry function's
//! parameter and nothing else becomes an HWIO parameter (see [`convert_function`]); any
//! other kernel gets a `permute_dims` binding.

use crate::dce::eliminate_dead_bindings;
use crate::pass::{Pass, PassError, PassInfo, PassOptions};
use smallvec::SmallVec;
use std::collections::HashMap;
use tgc_ir::{Attr, Attrs, Binding, Callee, Function, Module, Op, OpPattern, TensorType, ValueId};

pub static INFO: PassInfo = PassInfo {
    name: "convert-layout",
    summary:
        "Run 2-D convolutions in NHWC with HWIO kernels, cancelling the transposes between them",
    options: &[],
    create: |_: &PassOptions| Ok(Box::new(ConvertLayout)),
};

pub struct ConvertLayout;

impl Pass for ConvertLayout {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        let called = module.called_functions();
        for f in module.functions.values_mut() {
            let entry = !called.contains(&f.name);
            convert_function(f, entry).map_err(|e| PassError(format!("@{}: {e}", f.name)))?;
        }
        Ok(())
    }
}

type Perm = SmallVec<[usize; 4]>;

/// `v = permute_dims(v', NCHW_OF_NHWC)` for an NHWC `v'` of the NCHW `v`.
const NCHW_OF_NHWC: [usize; 4] = [0, 3, 1, 2];
/// `w = permute_dims(w', OIHW_OF_HWIO)` for an HWIO `w'` of the OIHW `w`.
const OIHW_OF_HWIO: [usize; 4] = [3, 2, 0, 1];

fn identity(rank: usize) -> Perm {
    (0..rank).collect()
}

fn is_identity(p: &[usize]) -> bool {
    p.iter().enumerate().all(|(i, &x)| i == x)
}

fn inverse(p: &[usize]) -> Perm {
    let mut inv: Perm = SmallVec::from_elem(0, p.len());
    for (i, &x) in p.iter().enumerate() {
        inv[x] = i;
    }
    inv
}

fn axes_attr(p: &[usize]) -> Attr {
    Attr::ints(p.iter().map(|&x| x as i64))
}

/// The rewriter of one function: `repr[v] = (base, perm)` says that the original value `v`
/// is `permute_dims(base, perm)` of the value `base` of the new binding list.
struct Rewriter<'f> {
    f: &'f mut Function,
    repr: Vec<(ValueId, Perm)>,
    /// Transposes emitted so far: (base, axes) -> value.
    emitted: HashMap<(ValueId, Perm), ValueId>,
    /// Values of the new list that are `reshape`s: value -> what it reshapes.
    reshaped: HashMap<ValueId, ValueId>,
}

impl Rewriter<'_> {
    /// Values the rewrite allocated stand for themselves.
    fn sync(&mut self) {
        for i in self.repr.len()..self.f.num_values() {
            let v = ValueId(i as u32);
            let rank = self.f.ty(v).rank();
            self.repr.push((v, identity(rank)));
        }
    }

    fn repr(&self, v: ValueId) -> (ValueId, Perm) {
        self.repr[v.index()].clone()
    }

    fn set(&mut self, v: ValueId, base: ValueId, perm: Perm) {
        self.repr[v.index()] = (base, perm);
    }

    /// Appends `op(operands) {attrs}` with one result, typed by the op's inference, named
    /// after `hint`, or bound to `result` (an original value, whose type it must have).
    fn emit(
        &mut self,
        op: Op,
        operands: &[ValueId],
        attrs: Attrs,
        hint: &str,
        result: Option<ValueId>,
    ) -> Result<ValueId, String> {
        let attrs = op.with_defaults(&attrs);
        let mut out = {
            let types: SmallVec<[&TensorType; 4]> =
                operands.iter().map(|&v| self.f.ty(v)).collect();
            op.infer(&types, &attrs)
                .map_err(|e| format!("{}: {e}", op.name()))?
        };
        if out.len() != 1 {
            return Err(format!(
                "{} has {} results, expected one",
                op.name(),
                out.len()
            ));
        }
        let ty = out.remove(0);
        let id = match result {
            Some(r) if self.f.ty(r) == &ty => r,
            Some(r) => {
                return Err(format!(
                    "{} of %{} gives {ty}, expected {}",
                    op.name(),
                    self.f.name_of(r),
                    self.f.ty(r)
                ))
            }
            None => self.f.new_value(Some(hint), ty),
        };
        self.f.bindings.push(Binding {
            results: [id].into_iter().collect(),
            callee: Callee::Op(op),
            operands: operands.iter().copied().collect(),
            attrs,
        });
        Ok(id)
    }

    /// A value `u` with `permute_dims(u, want) == v`, emitting one transpose when needed.
    fn get(&mut self, v: ValueId, want: &[usize]) -> Result<ValueId, String> {
        let (base, perm) = self.repr(v);
        let want_inv = inverse(want);
        let axes: Perm = want_inv.iter().map(|&j| perm[j]).collect();
        if is_identity(&axes) {
            return Ok(base);
        }
        if let Some(&u) = self.emitted.get(&(base, axes.clone())) {
            return Ok(u);
        }
        // A transpose that moves only unit dims keeps the data in order: a reshape (of what
        // `base` reshapes, when it is a reshape itself: a bias brought to rank 4).
        let shape = &self.f.ty(base).shape;
        let moved: Vec<usize> = axes.iter().copied().filter(|&a| shape[a] != 1).collect();
        let is_reshape = moved.windows(2).all(|w| w[0] < w[1]);
        let mut attrs = Attrs::new();
        let (op, operand) = if is_reshape {
            let new_shape: Vec<i64> = axes.iter().map(|&a| shape[a]).collect();
            attrs.insert("shape".into(), Attr::ints(new_shape));
            let src = self.reshaped.get(&base).copied().unwrap_or(base);
            (Op::lookup("reshape").expect("reshape is registered"), src)
        } else {
            attrs.insert("axes".into(), axes_attr(&axes));
            let op = Op::lookup("permute_dims").expect("permute_dims is registered");
            (op, base)
        };
        // The value in its own layout takes the original value's name and id.
        let (result, hint) = if is_identity(want) && base != v {
            (Some(v), String::new())
        } else {
            let suffix = match want {
                w if w == NCHW_OF_NHWC => "nhwc",
                w if w == OIHW_OF_HWIO => "hwio",
                _ => "t",
            };
            (None, format!("{}.{suffix}", self.f.name_of(v)))
        };
        let u = self.emit(op, &[operand], attrs, &hint, result)?;
        if is_reshape {
            self.reshaped.insert(u, operand);
        }
        self.emitted.insert((base, axes), u);
        Ok(u)
    }

    /// The binding as it was, its operands in their own layouts.
    fn keep(&mut self, b: &Binding) -> Result<(), String> {
        let mut operands = SmallVec::new();
        for &o in &b.operands {
            let rank = self.f.ty(o).rank();
            operands.push(self.get(o, &identity(rank))?);
        }
        if b.callee.op().is_some_and(|op| op.name() == "reshape") {
            self.reshaped.insert(b.results[0], operands[0]);
        }
        self.f.bindings.push(Binding {
            results: b.results.clone(),
            callee: b.callee.clone(),
            operands,
            attrs: b.attrs.clone(),
        });
        Ok(())
    }

    /// Emits `op` on the bases of `operands` (already in the new layout) with `attrs`; the
    /// result is `perm` of what it emits.
    fn emit_permuted(
        &mut self,
        b: &Binding,
        op: Op,
        operands: &[ValueId],
        attrs: Attrs,
        perm: Perm,
    ) -> Result<(), String> {
        let r = b.results[0];
        if is_identity(&perm) {
            // In its own layout after all (a reduction over the moved axes): the original.
            self.emit(op, operands, attrs, "", Some(r))?;
            return Ok(());
        }
        let suffix = if perm.as_slice() == NCHW_OF_NHWC {
            "nhwc"
        } else {
            "t"
        };
        let hint = format!("{}.{suffix}", self.f.name_of(r));
        let out = self.emit(op, operands, attrs, &hint, None)?;
        self.set(r, out, perm);
        Ok(())
    }

    fn binding(&mut self, b: &Binding) -> Result<(), String> {
        let Callee::Op(op) = &b.callee else {
            return self.keep(b);
        };
        let op = *op;
        if b.results.len() != 1 {
            return self.keep(b);
        }
        let attrs = op.with_defaults(&b.attrs);
        let def = op.def();
        let name = op.name();
        let r = b.results[0];
        match name {
            "permute_dims" => {
                let (base, perm) = self.repr(b.operands[0]);
                let rank = perm.len() as i64;
                let axes: Perm = match attrs.get("axes").and_then(Attr::as_ints) {
                    Some(a) => a
                        .iter()
                        .map(|&x| if x < 0 { x + rank } else { x })
                        .filter(|x| (0..rank).contains(x))
                        .map(|x| x as usize)
                        .collect(),
                    None => (0..perm.len()).rev().collect(),
                };
                if axes.len() != perm.len() {
                    return self.keep(b);
                }
                let composed = axes.iter().map(|&a| perm[a]).collect();
                self.set(r, base, composed);
                Ok(())
            }
            "nn.conv2d" => self.conv2d(b, op, attrs),
            "nn.max_pool2d" | "nn.avg_pool2d" => {
                let (base, perm) = self.repr(b.operands[0]);
                let nchw = attrs.get("layout").and_then(Attr::as_str) == Some("NCHW")
                    && attrs
                        .get("out_layout")
                        .is_none_or(|l| l.as_str() == Some("NCHW"));
                if !nchw || perm.as_slice() != NCHW_OF_NHWC {
                    return self.keep(b);
                }
                let mut attrs = attrs;
                attrs.insert("layout".into(), Attr::str("NHWC"));
                attrs.shift_remove("out_layout");
                self.emit_permuted(b, op, &[base], attrs, perm)
            }
            "nn.pad" => {
                let (base, perm) = self.repr(b.operands[0]);
                let widths = attrs.get("pad_width").and_then(Attr::as_ints);
                match widths {
                    Some(w) if !is_identity(&perm) && w.len() == 2 * perm.len() => {
                        let inv = inverse(&perm);
                        let new: Vec<i64> = (0..perm.len())
                            .flat_map(|j| [w[2 * inv[j]], w[2 * inv[j] + 1]])
                            .collect();
                        let mut attrs = attrs;
                        attrs.insert("pad_width".into(), Attr::ints(new));
                        self.emit_permuted(b, op, &[base], attrs, perm)
                    }
                    _ => self.keep(b),
                }
            }
            "sum" | "mean" | "max" | "min" | "prod" | "squeeze" => self.reduce(b, op, attrs),
            _ if def.pattern == OpPattern::ElemWise && b.operands.len() == 1 => {
                let (base, perm) = self.repr(b.operands[0]);
                if is_identity(&perm) {
                    return self.keep(b);
                }
                self.emit_permuted(b, op, &[base], attrs, perm)
            }
            // The binary ops with numpy broadcasting.
            _ if def.inlines_scalar_constant && b.operands.len() == 2 => self.binary(b, op, attrs),
            _ => self.keep(b),
        }
    }

    fn conv2d(&mut self, b: &Binding, op: Op, attrs: Attrs) -> Result<(), String> {
        if !convertible_conv(self.f, b) {
            return self.keep(b);
        }
        let x = self.get(b.operands[0], &NCHW_OF_NHWC)?;
        let w = self.get(b.operands[1], &OIHW_OF_HWIO)?;
        let mut attrs = attrs;
        attrs.insert("data_layout".into(), Attr::str("NHWC"));
        attrs.insert("kernel_layout".into(), Attr::str("HWIO"));
        attrs.shift_remove("out_layout");
        self.emit_permuted(b, op, &[x, w], attrs, NCHW_OF_NHWC.into_iter().collect())
    }

    fn binary(&mut self, b: &Binding, op: Op, attrs: Attrs) -> Result<(), String> {
        let rank = self.f.ty(b.results[0]).rank();
        let perm = b
            .operands
            .iter()
            .map(|&o| self.repr(o).1)
            .find(|p| p.len() == rank && !is_identity(p));
        let Some(perm) = perm else {
            return self.keep(b);
        };
        let mut operands: SmallVec<[ValueId; 2]> = SmallVec::new();
        for &o in &b.operands {
            let ty = self.f.ty(o).clone();
            let v = if ty.rank() == 0 {
                self.get(o, &[])?
            } else if ty.rank() == rank {
                self.get(o, &perm)?
            } else {
                // Broadcasting aligns trailing dims: make the leading ones explicit first.
                let own = self.get(o, &identity(ty.rank()))?;
                let mut shape = vec![1i64; rank - ty.rank()];
                shape.extend(ty.shape.iter().copied());
                let mut attrs = Attrs::new();
                attrs.insert("shape".into(), Attr::ints(shape));
                let reshape = Op::lookup("reshape").expect("reshape is registered");
                let hint = format!("{}.r{rank}", self.f.name_of(o));
                let full = self.emit(reshape, &[own], attrs, &hint, None)?;
                self.reshaped.insert(full, own);
                self.sync();
                self.get(full, &perm)?
            };
            operands.push(v);
        }
        self.emit_permuted(b, op, &operands, attrs, perm)
    }

    fn reduce(&mut self, b: &Binding, op: Op, attrs: Attrs) -> Result<(), String> {
        let (base, perm) = self.repr(b.operands[0]);
        let rank = perm.len();
        if is_identity(&perm) {
            return self.keep(b);
        }
        let squeeze = op.name() == "squeeze";
        let keepdims = !squeeze && attrs.get("keepdims").and_then(Attr::as_bool) == Some(true);
        let ty = self.f.ty(b.operands[0]).clone();
        let axes: Vec<usize> = match attrs.get("axis").and_then(Attr::as_ints) {
            Some(a) => a
                .iter()
                .map(|&x| (if x < 0 { x + rank as i64 } else { x }) as usize)
                .collect(),
            None if squeeze => (0..rank).filter(|&i| ty.shape[i] == 1).collect(),
            None => (0..rank).collect(),
        };
        if axes.iter().any(|&a| a >= rank) {
            return self.keep(b);
        }
        let mut new_axes: Vec<usize> = axes.iter().map(|&a| perm[a]).collect();
        new_axes.sort_unstable();
        let out_perm: Perm = if keepdims {
            perm.clone()
        } else {
            // The kept axes of the original, in order, and where each sits among the base's.
            let kept_base: Vec<usize> = (0..rank).filter(|j| !new_axes.contains(j)).collect();
            (0..rank)
                .filter(|i| !axes.contains(i))
                .map(|i| kept_base.iter().position(|&j| j == perm[i]).unwrap_or(0))
                .collect()
        };
        let mut attrs = attrs;
        attrs.insert(
            "axis".into(),
            Attr::ints(new_axes.iter().map(|&a| a as i64)),
        );
        self.emit_permuted(b, op, &[base], attrs, out_perm)
    }
}

/// Whether `b` is a 2-D convolution this pass converts.
fn convertible_conv(f: &Function, b: &Binding) -> bool {
    let Callee::Op(op) = &b.callee else {
        return false;
    };
    if op.name() != "nn.conv2d" || b.results.len() != 1 {
        return false;
    }
    let attrs = op.with_defaults(&b.attrs);
    let s = |k: &str| attrs.get(k).and_then(Attr::as_str);
    s("data_layout") == Some("NCHW")
        && s("kernel_layout") == Some("OIHW")
        && s("out_layout").is_none_or(|l| l == "NCHW")
        && b.operands.iter().all(|&o| f.ty(o).rank() == 4)
}

/// The parameters of `f` that are only ever the kernel of a converted convolution.
fn kernel_params(f: &Function) -> Vec<ValueId> {
    f.params_only_used_as(1, |b| convertible_conv(f, b))
}

/// The name of the function attribute that lists the parameters the pass gave another
/// layout: `{name: axes}`, the parameter being `permute_dims(original, axes)`.
pub const PERMUTED_PARAMS_ATTR: &str = "permuted_params";

/// Converts the 2-D convolutions of `f` to NHWC (see the module docs). In an `entry`
/// function (one no other function calls) a parameter that is only ever a converted
/// convolution's kernel becomes HWIO itself, so that no transpose of it runs with the model.
pub fn convert_function(f: &mut Function, entry: bool) -> Result<(), String> {
    let n = f.num_values();
    let mut repr: Vec<(ValueId, Perm)> = (0..n)
        .map(|i| {
            let v = ValueId(i as u32);
            (v, identity(f.ty(v).rank()))
        })
        .collect();
    if entry {
        let hwio_of_oihw = inverse(&OIHW_OF_HWIO);
        let mut permuted = Attrs::new();
        for p in kernel_params(f) {
            let ty = f.ty(p).clone();
            f.set_ty(p, ty.with_shape(hwio_of_oihw.iter().map(|&a| ty.shape[a])));
            repr[p.index()] = (p, OIHW_OF_HWIO.into_iter().collect());
            permuted.insert(f.name_of(p).to_string(), axes_attr(&hwio_of_oihw));
        }
        if !permuted.is_empty() {
            f.attrs
                .insert(PERMUTED_PARAMS_ATTR.into(), Attr::Dict(permuted));
        }
    }
    let bindings = std::mem::take(&mut f.bindings);
    let results = f.results.clone();
    let mut rw = Rewriter {
        f,
        repr,
        emitted: HashMap::new(),
        reshaped: HashMap::new(),
    };
    for b in &bindings {
        rw.binding(b)?;
        rw.sync();
    }
    let mut out = SmallVec::new();
    for r in results {
        let rank = rw.f.ty(r).rank();
        out.push(rw.get(r, &identity(rank))?);
    }
    rw.f.results = out;
    // What the converted ops no longer read (a reshape a transpose replaced).
    eliminate_dead_bindings(rw.f);
    Ok(())
}
