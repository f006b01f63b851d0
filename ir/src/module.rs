//! Modules, functions and SSA bindings.
//!
//! A [`Module`] holds functions by name, in a stable order. A [`Function`] has typed
//! parameters, one dataflow block of SSA [`Binding`]s and its results. Values live in an
//! arena inside their function and are referred to by [`ValueId`]; every value has a name
//! (unique in its function, printed `%name`) and a [`TensorType`].

use crate::attr::{attrs_same, Attrs};
use crate::ops::Op;
use crate::ty::TensorType;
use indexmap::IndexMap;
use smallvec::SmallVec;
use std::collections::HashMap;

/// A value in a function's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a value is called and what type it has.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueData {
    pub name: String,
    pub ty: TensorType,
}

/// What a binding applies: a registered op, or another function of the module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Callee {
    Op(Op),
    /// A call of a function of the same module, by name (`call @fused_conv2d(...)`).
    Func(String),
}

impl Callee {
    pub fn op(&self) -> Option<Op> {
        match self {
            Callee::Op(op) => Some(*op),
            Callee::Func(_) => None,
        }
    }
}

/// One SSA binding: `%r0, %r1 = callee(%a, %b) {attrs} : types`.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    pub results: SmallVec<[ValueId; 1]>,
    pub callee: Callee,
    pub operands: SmallVec<[ValueId; 4]>,
    pub attrs: Attrs,
}

/// Errors from building functions by hand.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BuildError {
    #[error("value name '%{0}' is already defined")]
    DuplicateName(String),
    #[error("function '@{0}' is already defined")]
    DuplicateFunction(String),
}

/// A function: typed parameters, a dataflow block of bindings, results and attributes.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub params: Vec<ValueId>,
    pub bindings: Vec<Binding>,
    pub results: SmallVec<[ValueId; 1]>,
    pub attrs: Attrs,
    values: Vec<ValueData>,
    names: HashMap<String, ValueId>,
    next_auto_name: u32,
}

impl Function {
    pub fn new(name: impl Into<String>) -> Self {
        Function {
            name: name.into(),
            params: Vec::new(),
            bindings: Vec::new(),
            results: SmallVec::new(),
            attrs: Attrs::new(),
            values: Vec::new(),
            names: HashMap::new(),
            next_auto_name: 0,
        }
    }

    pub fn value(&self, id: ValueId) -> &ValueData {
        &self.values[id.index()]
    }

    pub fn ty(&self, id: ValueId) -> &TensorType {
        &self.values[id.index()].ty
    }

    pub fn name_of(&self, id: ValueId) -> &str {
        &self.values[id.index()].name
    }

    /// Number of values in the arena (including ones no longer used by any binding).
    pub fn num_values(&self) -> usize {
        self.values.len()
    }

    pub fn value_by_name(&self, name: &str) -> Option<ValueId> {
        self.names.get(name).copied()
    }

    /// Changes a value's type (used by passes that refine types).
    pub fn set_ty(&mut self, id: ValueId, ty: TensorType) {
        self.values[id.index()].ty = ty;
    }

    /// Allocates a value with exactly `name`; fails if the name is taken.
    pub fn new_value_named(&mut self, name: &str, ty: TensorType) -> Result<ValueId, BuildError> {
        if self.names.contains_key(name) {
            return Err(BuildError::DuplicateName(name.to_string()));
        }
        Ok(self.alloc(name.to_string(), ty))
    }

    /// Allocates a value. With a name hint the name is the hint, or the hint with a numeric
    /// suffix when it is taken; without one it is the next free number (`%0`, `%1`, ...).
    pub fn new_value(&mut self, hint: Option<&str>, ty: TensorType) -> ValueId {
        let name = match hint {
            Some(h) if !self.names.contains_key(h) => h.to_string(),
            Some(h) => {
                let mut i = 1u32;
                loop {
                    let candidate = format!("{h}_{i}");
                    if !self.names.contains_key(&candidate) {
                        break candidate;
                    }
                    i += 1;
                }
            }
            None => loop {
                let candidate = self.next_auto_name.to_string();
                self.next_auto_name += 1;
                if !self.names.contains_key(&candidate) {
                    break candidate;
                }
            },
        };
        self.alloc(name, ty)
    }

    fn alloc(&mut self, name: String, ty: TensorType) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.names.insert(name.clone(), id);
        self.values.push(ValueData { name, ty });
        id
    }

    /// Adds a parameter (see [`Function::new_value`] for naming).
    pub fn add_param(&mut self, hint: Option<&str>, ty: TensorType) -> ValueId {
        let id = self.new_value(hint, ty);
        self.params.push(id);
        id
    }

    /// Appends a binding whose result values were already allocated.
    pub fn push(&mut self, binding: Binding) {
        self.bindings.push(binding);
    }

    /// Appends a binding of `callee` with results of the given types and returns them.
    pub fn push_binding(
        &mut self,
        callee: Callee,
        operands: &[ValueId],
        attrs: Attrs,
        result_types: Vec<TensorType>,
    ) -> SmallVec<[ValueId; 1]> {
        let results: SmallVec<[ValueId; 1]> = result_types
            .into_iter()
            .map(|t| self.new_value(None, t))
            .collect();
        self.bindings.push(Binding {
            results: results.clone(),
            callee,
            operands: operands.iter().copied().collect(),
            attrs,
        });
        results
    }

    pub fn result_types(&self) -> Vec<TensorType> {
        self.results.iter().map(|r| self.ty(*r).clone()).collect()
    }

    pub fn param_types(&self) -> Vec<TensorType> {
        self.params.iter().map(|p| self.ty(*p).clone()).collect()
    }

    /// The parameters whose every use is operand `slot` of a binding that `reads` accepts
    /// (at least one such use; being a result of the function is another use), in order.
    pub fn params_only_used_as(
        &self,
        slot: usize,
        reads: impl Fn(&Binding) -> bool,
    ) -> Vec<ValueId> {
        let mut wanted = vec![0usize; self.num_values()];
        let mut other = vec![0usize; self.num_values()];
        for b in &self.bindings {
            let accepted = reads(b);
            for (pos, o) in b.operands.iter().enumerate() {
                if accepted && pos == slot {
                    wanted[o.index()] += 1;
                } else {
                    other[o.index()] += 1;
                }
            }
        }
        for r in &self.results {
            other[r.index()] += 1;
        }
        self.params
            .iter()
            .copied()
            .filter(|p| wanted[p.index()] > 0 && other[p.index()] == 0)
            .collect()
    }

    /// Whether the function carries `Primitive = true` (a fused group, i.e. a tuning task).
    pub fn is_primitive(&self) -> bool {
        matches!(
            self.attrs.get("Primitive"),
            Some(crate::attr::Attr::Bool(true))
        )
    }

    /// Alpha-equivalence: same parameter types, the same bindings in the same order (callee,
    /// attributes, operands up to renaming, result types), the same results and function
    /// attributes. Value names and the function's own name are ignored.
    pub fn structurally_equal(&self, other: &Function) -> bool {
        if self.params.len() != other.params.len()
            || self.bindings.len() != other.bindings.len()
            || self.results.len() != other.results.len()
            || !attrs_same(&self.attrs, &other.attrs)
        {
            return false;
        }
        // Map our value ids to theirs as definitions are met.
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        for (a, b) in self.params.iter().zip(&other.params) {
            if self.ty(*a) != other.ty(*b) {
                return false;
            }
            map.insert(*a, *b);
        }
        for (ba, bb) in self.bindings.iter().zip(&other.bindings) {
            if ba.callee != bb.callee
                || ba.operands.len() != bb.operands.len()
                || ba.results.len() != bb.results.len()
                || !attrs_same(&ba.attrs, &bb.attrs)
            {
                return false;
            }
            for (oa, ob) in ba.operands.iter().zip(&bb.operands) {
                if map.get(oa) != Some(ob) {
                    return false;
                }
            }
            for (ra, rb) in ba.results.iter().zip(&bb.results) {
                if self.ty(*ra) != other.ty(*rb) {
                    return false;
                }
                map.insert(*ra, *rb);
            }
        }
        self.results
            .iter()
            .zip(&other.results)
            .all(|(a, b)| map.get(a) == Some(b))
    }
}

/// A module: named functions in a stable order, plus module attributes.
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub name: String,
    pub attrs: Attrs,
    pub functions: IndexMap<String, Function>,
}

impl Module {
    pub fn new(name: impl Into<String>) -> Self {
        Module {
            name: name.into(),
            attrs: Attrs::new(),
            functions: IndexMap::new(),
        }
    }

    /// Adds a function; fails if one of that name exists.
    pub fn add_function(&mut self, f: Function) -> Result<(), BuildError> {
        if self.functions.contains_key(&f.name) {
            return Err(BuildError::DuplicateFunction(f.name.clone()));
        }
        self.functions.insert(f.name.clone(), f);
        Ok(())
    }

    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.get(name)
    }

    pub fn function_mut(&mut self, name: &str) -> Option<&mut Function> {
        self.functions.get_mut(name)
    }

    /// The names of the functions some binding of the module calls (an entry function is one
    /// not among them).
    pub fn called_functions(&self) -> std::collections::HashSet<String> {
        self.functions
            .values()
            .flat_map(|f| f.bindings.iter())
            .filter_map(|b| match &b.callee {
                Callee::Func(name) => Some(name.clone()),
                Callee::Op(_) => None,
            })
            .collect()
    }

    /// Total number of bindings over all functions.
    pub fn num_bindings(&self) -> usize {
        self.functions.values().map(|f| f.bindings.len()).sum()
    }

    /// Same module name, attributes and functions (in the same order and with the same names,
    /// since calls refer to functions by name), each function alpha-equivalent.
    pub fn structurally_equal(&self, other: &Module) -> bool {
        self.name == other.name
            && attrs_same(&self.attrs, &other.attrs)
            && self.functions.len() == other.functions.len()
            && self
                .functions
                .iter()
                .zip(&other.functions)
                .all(|((na, fa), (nb, fb))| na == nb && fa.structurally_equal(fb))
    }
}
