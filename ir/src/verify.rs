//! The verifier: is a module well formed?
//!
//! Per function, in one pass over parameters, bindings and results:
//! - SSA: every value id is in range, defined once (as a parameter or a binding result) and
//!   defined before any use; the function's results are defined; parameters have no
//!   negative extent.
//! - Op bindings: operand count per the op's arity, attributes per its schema (no unknown
//!   names, kinds per [`AttrKind::accepts`], required ones present), result count and types
//!   equal to what shape inference gives.
//! - Call bindings: the callee exists, operands match its parameters in number and type,
//!   results match its results in number and type.
//!
//! Per module: no function reaches itself through calls (no recursion).
//!
//! Only the first error is reported, so the common case (a valid module) stays one cheap
//! pass: no allocation per binding besides what inference itself needs.

use crate::attr::{AttrKind, Attrs};
use crate::module::{Binding, Callee, Function, Module, ValueId};
use crate::ops::{find_attr, Arity, AttrDefault, Op, OpDef};
use crate::ty::TensorType;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::fmt;

/// A violation of an op's attribute schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AttrProblem {
    /// Escaped, so that the message stays on one line whatever the name.
    #[error("unknown attribute '{}'", .0.escape_debug())]
    Unknown(String),
    #[error("attribute '{name}' must be {expected}")]
    Kind { name: String, expected: AttrKind },
    #[error("missing required attribute '{0}'")]
    Missing(String),
}

/// Checks `attrs` against the schema of `def`.
pub fn check_attrs(def: &OpDef, attrs: &Attrs) -> Result<(), AttrProblem> {
    for (name, value) in attrs {
        let spec = def
            .attr_spec(name)
            .ok_or_else(|| AttrProblem::Unknown(name.clone()))?;
        if !spec.kind.accepts(value) {
            return Err(AttrProblem::Kind {
                name: name.clone(),
                expected: spec.kind,
            });
        }
    }
    match def
        .attrs
        .iter()
        .find(|s| matches!(s.default, AttrDefault::Required) && find_attr(attrs, s.name).is_none())
    {
        Some(s) => Err(AttrProblem::Missing(s.name.to_string())),
        None => Ok(()),
    }
}

/// What is wrong; [`VerifyError`] says where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("value #{id} is out of range (the function has {count} values)")]
    ValueOutOfRange { id: u32, count: usize },
    #[error("operand {index} %{name} is used before it is defined")]
    UseBeforeDef { index: usize, name: String },
    #[error("%{0} is defined more than once")]
    Redefined(String),
    #[error("result %{0} is not defined")]
    UndefinedResult(String),
    #[error("parameter %{name} has a negative extent: {ty}")]
    NegativeExtent { name: String, ty: TensorType },
    #[error("takes {expected} operands, got {got}")]
    Arity { expected: Arity, got: usize },
    #[error("{0}")]
    Attr(AttrProblem),
    #[error("{0}")]
    Infer(String),
    #[error("has {got} results, inferred {expected}")]
    ResultCount { expected: usize, got: usize },
    #[error("result {}type {declared} does not match inferred {inferred}", name_prefix(.name))]
    ResultType {
        /// The result's name when the binding has several results.
        name: Option<String>,
        declared: TensorType,
        inferred: TensorType,
    },
    #[error("calls unknown function @{0}")]
    UnknownCallee(String),
    // The call problems below need not name the callee: the binding (`%3 = call @f`) does.
    #[error("the callee takes {expected} operands, got {got}")]
    CallArity { expected: usize, got: usize },
    #[error("operand {index} has type {got}, the callee expects {expected}")]
    CallOperandType {
        index: usize,
        expected: TensorType,
        got: TensorType,
    },
    #[error("has {got} results, the callee returns {expected}")]
    CallResultCount { expected: usize, got: usize },
    #[error("result {index} has type {declared}, the callee returns {expected}")]
    CallResultType {
        index: usize,
        expected: TensorType,
        declared: TensorType,
    },
    #[error("the callee's signature is malformed: value #{0} is out of range")]
    MalformedCallee(u32),
    #[error("attribute `{attr}` must list distinct parameter indices below {params}, got {got}")]
    LayoutFree {
        attr: &'static str,
        params: usize,
        got: String,
    },
    #[error("recursive call: {}", call_chain(.cycle))]
    Recursion { cycle: Vec<String> },
}

/// `%name ` for a named result, nothing otherwise.
fn name_prefix(name: &Option<String>) -> String {
    name.as_ref().map(|n| format!("%{n} ")).unwrap_or_default()
}

/// `@a -> @b -> @a`.
fn call_chain(cycle: &[String]) -> String {
    cycle
        .iter()
        .map(|f| format!("@{f}"))
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// A verification failure: the function, the binding when there is one (printed as its
/// first result and callee, `%3 = nn.conv2d`) and the problem. Displays as one line:
/// `@main: %3 = nn.conv2d: result type tensor<...> does not match inferred tensor<...>`.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyError {
    pub function: String,
    /// Index of the offending binding in the function.
    pub binding: Option<usize>,
    /// The binding as printed in messages.
    pub at: Option<String>,
    pub problem: Box<Problem>,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}: ", self.function)?;
        if let Some(at) = &self.at {
            write!(f, "{at}: ")?;
        }
        write!(f, "{}", self.problem)
    }
}

impl std::error::Error for VerifyError {}

/// Verifies every function of `m`, then that no call chain is recursive.
pub fn verify_module(m: &Module) -> Result<(), VerifyError> {
    for f in m.functions.values() {
        verify_function(m, f)?;
    }
    check_no_recursion(m)
}

/// Verifies one function of `m` (calls are checked against `m`'s functions). Recursion
/// through other functions is a module property; [`verify_module`] checks it. A function
/// that calls itself directly is reported here.
pub fn verify_function(m: &Module, f: &Function) -> Result<(), VerifyError> {
    FunctionVerifier {
        m,
        f,
        defined: vec![false; f.num_values()],
    }
    .run()
}

struct FunctionVerifier<'a> {
    m: &'a Module,
    f: &'a Function,
    /// Whether each value has been defined so far, in program order.
    defined: Vec<bool>,
}

impl<'a> FunctionVerifier<'a> {
    fn error(&self, binding: Option<usize>, problem: Problem) -> VerifyError {
        VerifyError {
            function: self.f.name.clone(),
            binding,
            at: binding.map(|i| describe_binding(self.f, i)),
            problem: Box::new(problem),
        }
    }

    fn in_range(&self, id: ValueId, binding: Option<usize>) -> Result<(), VerifyError> {
        if id.index() < self.defined.len() {
            Ok(())
        } else {
            Err(self.error(
                binding,
                Problem::ValueOutOfRange {
                    id: id.0,
                    count: self.defined.len(),
                },
            ))
        }
    }

    fn define(&mut self, id: ValueId, binding: Option<usize>) -> Result<(), VerifyError> {
        self.in_range(id, binding)?;
        if std::mem::replace(&mut self.defined[id.index()], true) {
            return Err(self.error(binding, Problem::Redefined(self.f.name_of(id).to_string())));
        }
        Ok(())
    }

    fn run(mut self) -> Result<(), VerifyError> {
        let f = self.f;
        if let Some(a) = f.attrs.get(crate::lowering::LAYOUT_FREE_ATTR) {
            if crate::lowering::layout_free_indices(a, f.params.len()).is_none() {
                return Err(self.error(
                    None,
                    Problem::LayoutFree {
                        attr: crate::lowering::LAYOUT_FREE_ATTR,
                        params: f.params.len(),
                        got: crate::text::attr_text(a),
                    },
                ));
            }
        }
        for &p in &f.params {
            self.define(p, None)?;
            let ty = f.ty(p);
            if ty.shape.iter().any(|&d| d < 0) {
                let name = f.name_of(p).to_string();
                return Err(self.error(
                    None,
                    Problem::NegativeExtent {
                        name,
                        ty: ty.clone(),
                    },
                ));
            }
        }
        for (i, b) in f.bindings.iter().enumerate() {
            for (index, &v) in b.operands.iter().enumerate() {
                self.in_range(v, Some(i))?;
                if !self.defined[v.index()] {
                    let name = f.name_of(v).to_string();
                    return Err(self.error(Some(i), Problem::UseBeforeDef { index, name }));
                }
            }
            for &r in &b.results {
                self.define(r, Some(i))?;
            }
            let checked = match &b.callee {
                Callee::Op(op) => self.check_op_binding(b, *op),
                Callee::Func(name) => self.check_call(b, name),
            };
            checked.map_err(|p| self.error(Some(i), p))?;
        }
        for &r in &f.results {
            self.in_range(r, None)?;
            if !self.defined[r.index()] {
                return Err(self.error(None, Problem::UndefinedResult(f.name_of(r).to_string())));
            }
        }
        Ok(())
    }

    fn check_op_binding(&self, b: &Binding, op: Op) -> Result<(), Problem> {
        let (f, def) = (self.f, op.def());
        if !def.inputs.accepts(b.operands.len()) {
            return Err(Problem::Arity {
                expected: def.inputs,
                got: b.operands.len(),
            });
        }
        check_attrs(def, &b.attrs).map_err(Problem::Attr)?;
        let operands: SmallVec<[&TensorType; 4]> = b.operands.iter().map(|&v| f.ty(v)).collect();
        let inferred = op.infer(&operands, &b.attrs).map_err(Problem::Infer)?;
        if inferred.len() != b.results.len() {
            return Err(Problem::ResultCount {
                expected: inferred.len(),
                got: b.results.len(),
            });
        }
        let several = b.results.len() > 1;
        for (&r, inferred) in b.results.iter().zip(inferred) {
            if f.ty(r) != &inferred {
                return Err(Problem::ResultType {
                    name: several.then(|| f.name_of(r).to_string()),
                    declared: f.ty(r).clone(),
                    inferred,
                });
            }
        }
        Ok(())
    }

    fn check_call(&self, b: &Binding, callee: &str) -> Result<(), Problem> {
        let f = self.f;
        let g = self
            .m
            .function(callee)
            .ok_or_else(|| Problem::UnknownCallee(callee.to_string()))?;
        if g.name == f.name {
            return Err(Problem::Recursion {
                cycle: vec![f.name.clone(), f.name.clone()],
            });
        }
        // The callee's own verification reports its defects; here its signature only must be
        // readable.
        let sig = |id: ValueId| {
            (id.index() < g.num_values())
                .then(|| g.ty(id))
                .ok_or(Problem::MalformedCallee(id.0))
        };
        if g.params.len() != b.operands.len() {
            return Err(Problem::CallArity {
                expected: g.params.len(),
                got: b.operands.len(),
            });
        }
        for (index, (&p, &v)) in g.params.iter().zip(&b.operands).enumerate() {
            let expected = sig(p)?;
            if expected != f.ty(v) {
                return Err(Problem::CallOperandType {
                    index,
                    expected: expected.clone(),
                    got: f.ty(v).clone(),
                });
            }
        }
        if g.results.len() != b.results.len() {
            return Err(Problem::CallResultCount {
                expected: g.results.len(),
                got: b.results.len(),
            });
        }
        for (index, (&gr, &r)) in g.results.iter().zip(&b.results).enumerate() {
            let expected = sig(gr)?;
            if expected != f.ty(r) {
                return Err(Problem::CallResultType {
                    index,
                    expected: expected.clone(),
                    declared: f.ty(r).clone(),
                });
            }
        }
        Ok(())
    }
}

/// `%first_result = callee` for messages, or `binding #i (callee)` when the binding has no
/// (valid) result.
fn describe_binding(f: &Function, i: usize) -> String {
    let b = &f.bindings[i];
    let callee = match &b.callee {
        Callee::Op(op) => op.name().to_string(),
        Callee::Func(name) => format!("call @{name}"),
    };
    match b.results.first() {
        Some(r) if r.index() < f.num_values() => format!("%{} = {callee}", f.name_of(*r)),
        _ => format!("binding #{i} ({callee})"),
    }
}

/// Depth-first search of the call graph; a call back into a function still on the stack is
/// recursion. Iterative, so that long call chains cannot overflow the stack.
fn check_no_recursion(m: &Module) -> Result<(), VerifyError> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        OnStack,
        Done,
    }
    let index: HashMap<&str, usize> = m
        .functions
        .keys()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    // Per function: (binding index, callee index) for each call of a known function.
    let calls: Vec<Vec<(usize, usize)>> = m
        .functions
        .values()
        .map(|f| {
            f.bindings
                .iter()
                .enumerate()
                .filter_map(|(i, b)| match &b.callee {
                    Callee::Func(name) => index.get(name.as_str()).map(|&g| (i, g)),
                    Callee::Op(_) => None,
                })
                .collect()
        })
        .collect();
    let mut state = vec![State::New; calls.len()];
    for root in 0..calls.len() {
        if state[root] != State::New {
            continue;
        }
        // (function, next call to follow)
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = State::OnStack;
        while let Some(top) = stack.last_mut() {
            let (fi, next) = *top;
            let Some(&(binding, g)) = calls[fi].get(next) else {
                state[fi] = State::Done;
                stack.pop();
                continue;
            };
            top.1 += 1;
            match state[g] {
                State::New => {
                    state[g] = State::OnStack;
                    stack.push((g, 0));
                }
                State::OnStack => {
                    let start = stack.iter().position(|&(h, _)| h == g).unwrap_or(0);
                    let mut cycle: Vec<String> = stack[start..]
                        .iter()
                        .map(|&(h, _)| m.functions[h].name.clone())
                        .collect();
                    cycle.push(m.functions[g].name.clone());
                    let f = &m.functions[fi];
                    return Err(VerifyError {
                        function: f.name.clone(),
                        binding: Some(binding),
                        at: Some(describe_binding(f, binding)),
                        problem: Box::new(Problem::Recursion { cycle }),
                    });
                }
                State::Done => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
