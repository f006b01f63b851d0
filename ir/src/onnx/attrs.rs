//! Typed access to a node's ONNX attributes. A wrong kind is an error naming the attribute;
//! an absent attribute is `None` (the converter knows the ONNX default).

use super::error::{bail, PResult};
use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, TensorProto};

/// The attributes of one node.
#[derive(Clone, Copy)]
pub(crate) struct NodeAttrs<'m> {
    list: &'m [AttributeProto],
}

impl<'m> NodeAttrs<'m> {
    pub fn new(list: &'m [AttributeProto]) -> Self {
        NodeAttrs { list }
    }

    fn get(&self, name: &str) -> Option<&'m AttributeProto> {
        self.list.iter().find(|a| a.name == name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The declared kind, or, for files that leave it unset, the kind its filled field says.
    fn kind(a: &AttributeProto) -> AttributeType {
        match a.type_.enum_value() {
            Ok(AttributeType::UNDEFINED) | Err(_) => {
                if a.t.is_some() {
                    AttributeType::TENSOR
                } else if !a.ints.is_empty() {
                    AttributeType::INTS
                } else if !a.floats.is_empty() {
                    AttributeType::FLOATS
                } else if !a.s.is_empty() {
                    AttributeType::STRING
                } else if a.f != 0.0 {
                    AttributeType::FLOAT
                } else {
                    AttributeType::INT
                }
            }
            Ok(k) => k,
        }
    }

    fn expect(&self, name: &str, want: AttributeType) -> PResult<Option<&'m AttributeProto>> {
        let Some(a) = self.get(name) else { return Ok(None) };
        let got = Self::kind(a);
        if got != want {
            bail!(
                "attribute '{name}' must be {}, the model gives {}",
                kind_name(want),
                kind_name(got)
            );
        }
        Ok(Some(a))
    }

    pub fn int(&self, name: &str) -> PResult<Option<i64>> {
        Ok(self.expect(name, AttributeType::INT)?.map(|a| a.i))
    }

    pub fn int_or(&self, name: &str, default: i64) -> PResult<i64> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    pub fn float(&self, name: &str) -> PResult<Option<f64>> {
        Ok(self.expect(name, AttributeType::FLOAT)?.map(|a| a.f as f64))
    }

    pub fn float_or(&self, name: &str, default: f64) -> PResult<f64> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    pub fn ints(&self, name: &str) -> PResult<Option<Vec<i64>>> {
        Ok(self.expect(name, AttributeType::INTS)?.map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> PResult<Option<Vec<f64>>> {
        Ok(self
            .expect(name, AttributeType::FLOATS)?
            .map(|a| a.floats.iter().map(|f| *f as f64).collect()))
    }

    pub fn string(&self, name: &str) -> PResult<Option<String>> {
        let Some(a) = self.expect(name, AttributeType::STRING)? else { return Ok(None) };
        match String::from_utf8(a.s.clone()) {
            Ok(s) => Ok(Some(s)),
            Err(_) => bail!("attribute '{name}' is not valid UTF-8"),
        }
    }

    pub fn string_or(&self, name: &str, default: &str) -> PResult<String> {
        Ok(self.string(name)?.unwrap_or_else(|| default.to_string()))
    }

    pub fn tensor(&self, name: &str) -> PResult<Option<&'m TensorProto>> {
        let Some(a) = self.expect(name, AttributeType::TENSOR)? else { return Ok(None) };
        match a.t.as_ref() {
            Some(t) => Ok(Some(t)),
            None => bail!("attribute '{name}' has no tensor"),
        }
    }

    /// Names of all attributes, for "unsupported attribute" checks.
    pub fn names(&self) -> impl Iterator<Item = &'m str> {
        self.list.iter().map(|a| a.name.as_str())
    }
}

fn kind_name(k: AttributeType) -> &'static str {
    match k {
        AttributeType::INT => "an int",
        AttributeType::FLOAT => "a float",
        AttributeType::STRING => "a string",
        AttributeType::INTS => "a list of ints",
        AttributeType::FLOATS => "a list of floats",
        AttributeType::STRINGS => "a list of strings",
        AttributeType::TENSOR => "a tensor",
        AttributeType::TENSORS => "a list of tensors",
        AttributeType::GRAPH | AttributeType::GRAPHS => "a graph",
        AttributeType::SPARSE_TENSOR | AttributeType::SPARSE_TENSORS => "a sparse tensor",
        AttributeType::TYPE_PROTO | AttributeType::TYPE_PROTOS => "a type",
        AttributeType::UNDEFINED => "undefined",
    }
}
