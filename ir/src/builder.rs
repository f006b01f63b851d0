//! Checked builders: append op applications and calls to a [`Function`] with their result
//! types inferred from the op registry or the callee's signature. What they build passes the
//! verifier's per-binding checks by construction.

use crate::attr::Attrs;
use crate::error::IrError;
use crate::module::{Callee, Function, Module, ValueId};
use crate::ops::Op;
use crate::ty::TensorType;
use crate::verify::check_attrs;
use smallvec::SmallVec;

impl Function {
    fn check_operands(&self, operands: &[ValueId]) -> Result<(), IrError> {
        match operands.iter().find(|v| v.index() >= self.num_values()) {
            Some(v) => Err(IrError::UnknownValue(v.0)),
            None => Ok(()),
        }
    }

    /// Checks `op(operands) {attrs}` and infers its result types, without appending it.
    fn check_op(
        &self,
        op: &str,
        operands: &[ValueId],
        attrs: &Attrs,
    ) -> Result<(Op, Attrs, Vec<TensorType>), IrError> {
        let handle = Op::lookup(op).ok_or_else(|| IrError::UnknownOp(op.to_string()))?;
        let def = handle.def();
        if !def.inputs.accepts(operands.len()) {
            return Err(IrError::Arity {
                op: op.to_string(),
                expected: def.inputs,
                got: operands.len(),
            });
        }
        self.check_operands(operands)?;
        check_attrs(def, attrs)
            .map_err(|p| IrError::Attr { op: op.to_string(), message: p.to_string() })?;
        let attrs = handle.with_defaults(attrs);
        let types: SmallVec<[_; 4]> = operands.iter().map(|&v| self.ty(v)).collect();
        let results = handle
            .infer(&types, &attrs)
            .map_err(|message| IrError::Infer { op: op.to_string(), message })?;
        Ok((handle, attrs, results))
    }

    /// Appends `op(operands) {attrs}`: checks arity and the attribute schema, fills in default
    /// attributes, infers the result types and returns the new result values.
    pub fn push_op(
        &mut self,
        op: &str,
        operands: &[ValueId],
        attrs: Attrs,
    ) -> Result<SmallVec<[ValueId; 1]>, IrError> {
        let (handle, attrs, results) = self.check_op(op, operands, &attrs)?;
        Ok(self.push_binding(Callee::Op(handle), operands, attrs, results))
    }

    /// [`Function::push_op`] for an op with exactly one result; an op with several results
    /// is refused and nothing is appended.
    pub fn push_op1(
        &mut self,
        op: &str,
        operands: &[ValueId],
        attrs: Attrs,
    ) -> Result<ValueId, IrError> {
        let (handle, attrs, results) = self.check_op(op, operands, &attrs)?;
        if results.len() != 1 {
            return Err(IrError::NotSingleResult { op: op.to_string(), count: results.len() });
        }
        Ok(self.push_binding(Callee::Op(handle), operands, attrs, results)[0])
    }

    /// Appends `call @callee(operands)`, checking the operands against the callee's
    /// parameters; the results take the callee's result types.
    pub fn call(
        &mut self,
        module: &Module,
        callee: &str,
        operands: &[ValueId],
    ) -> Result<SmallVec<[ValueId; 1]>, IrError> {
        let f = module.function(callee).ok_or_else(|| IrError::UnknownFunction(callee.into()))?;
        if f.params.len() != operands.len() {
            return Err(IrError::CallArity {
                callee: callee.to_string(),
                expected: f.params.len(),
                got: operands.len(),
            });
        }
        self.check_operands(operands)?;
        // The callee may be malformed (it is verified separately): read its signature safely.
        let sig = |id: ValueId| (id.index() < f.num_values()).then(|| f.ty(id));
        for (index, (&p, &v)) in f.params.iter().zip(operands).enumerate() {
            let expected = sig(p).ok_or(IrError::UnknownValue(p.0))?;
            if expected != self.ty(v) {
                return Err(IrError::CallOperandType {
                    callee: callee.to_string(),
                    index,
                    expected: Box::new(expected.clone()),
                    got: Box::new(self.ty(v).clone()),
                });
            }
        }
        let results = f
            .results
            .iter()
            .map(|&r| sig(r).cloned().ok_or(IrError::UnknownValue(r.0)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.push_binding(Callee::Func(callee.to_string()), operands, Attrs::new(), results))
    }
}

#[cfg(test)]
mod tests;
