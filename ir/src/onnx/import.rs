//! The driver: decode the model, check the opset, make parameters of the graph inputs with
//! static shapes, walk the nodes in order through the converters, and return `@main`.

use super::attrs::NodeAttrs;
use super::context::{Importer, Val};
use super::convert::{convert, NodeIn};
use super::error::{one_line, PResult, Place, Problem};
use super::names::{module_name, sanitize};
use super::tensor::{self, num_elements};
use super::ImportOptions;
use crate::attr::Attr;
use crate::module::{Function, Module};
use crate::ty::TensorType;
use onnx_protobuf::{type_proto, GraphProto, Message, ModelProto, ValueInfoProto};
use std::collections::HashMap;

/// The default-domain opsets the frontend accepts. Opsets 11 to 21 are what exporters emit
/// today and what the tests cover; 7 to 10 and 22 differ only in ops handled here too.
pub(crate) const OPSETS: std::ops::RangeInclusive<i64> = 7..=22;

pub(crate) fn import_model(
    bytes: &[u8],
    file: &str,
    shapes: &[(String, Vec<i64>)],
    opts: &ImportOptions,
) -> PResult<Module> {
    let model = ModelProto::parse_from_bytes(bytes).map_err(|e| {
        let detail = e.to_string();
        let lower = detail.to_lowercase();
        let why = if lower.contains("eof") || lower.contains("truncated") {
            "truncated protobuf".to_string()
        } else {
            format!("bad protobuf: {detail}")
        };
        Problem::msg(format!("not a valid ONNX model ({why})"))
    })?;
    let Some(graph) = model.graph.as_ref() else {
        return Err(Problem::msg("not a valid ONNX model (no graph)"));
    };
    let opset = default_opset(&model)?;

    let mut cx = Importer::new(Function::new("main"), opts, opset);
    for init in &graph.initializer {
        let place = Place::Initializer(init.name.clone());
        let v = Val::weight(&init.name, init).map_err(|p| p.at(&place))?;
        if cx.env.insert(init.name.as_str(), v).is_some() {
            return Err(Problem::new(place, "is defined twice"));
        }
    }
    let mut num_inputs = 0i64;
    let mut overrides: HashMap<&str, &[i64]> = HashMap::new();
    for (name, dims) in shapes {
        if overrides.insert(name.as_str(), dims.as_slice()).is_some() {
            return Err(Problem::msg(format!(
                "--shape gives input '{}' twice",
                one_line(name)
            )));
        }
    }
    for input in &graph.input {
        if cx.env.contains_key(input.name.as_str()) {
            // An input with an initializer of the same name (IR < 4 style): a weight.
            continue;
        }
        let ty = input_type(input, overrides.remove(input.name.as_str()))?;
        let id = cx.f.add_param(sanitize(&input.name).as_deref(), ty);
        cx.env.insert(input.name.as_str(), Val::Ir(id));
        num_inputs += 1;
    }
    if let Some(name) = overrides.keys().next() {
        let inputs: Vec<&str> = graph
            .input
            .iter()
            .map(|i| i.name.as_str())
            .filter(|n| !graph.initializer.iter().any(|t| t.name == *n))
            .take(8)
            .collect();
        return Err(Problem::msg(format!(
            "--shape names '{}', which is not an input of the model (inputs: {})",
            one_line(name),
            one_line(&inputs.join(", "))
        )));
    }

    let mut node_of_binding = convert_nodes(&mut cx, graph)?;

    for out in &graph.output {
        let place = Place::Output(out.name.clone());
        let Some(v) = cx.env.get(out.name.as_str()) else {
            return Err(Problem::new(
                place,
                "is not produced by any node, input or initializer",
            ));
        };
        let v = v.clone();
        let id = cx.materialize(&v).map_err(|p| p.at(&place))?;
        cx.f.results.push(id);
    }
    if graph.output.is_empty() {
        return Err(Problem::msg("the graph has no outputs"));
    }

    // Bindings made for the outputs themselves belong to no node.
    node_of_binding.resize(cx.f.bindings.len(), usize::MAX);
    let mut f = cx.f;
    super::order::relax_emission_order(&mut f, &node_of_binding);
    f.attrs.insert("num_input".into(), Attr::Int(num_inputs));
    let mut m = Module::new(module_name(file));
    m.attrs.insert("source".into(), Attr::str(one_line(file)));
    m.attrs.insert("onnx_opset".into(), Attr::Int(opset));
    if !model.producer_name.is_empty() {
        let producer = format!("{} {}", model.producer_name, model.producer_version);
        m.attrs
            .insert("onnx_producer".into(), Attr::str(one_line(producer.trim())));
    }
    m.add_function(f).map_err(|e| Problem::msg(e.to_string()))?;
    Ok(m)
}

fn default_opset(model: &ModelProto) -> PResult<i64> {
    let found = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version);
    match found {
        Some(v) if OPSETS.contains(&v) => Ok(v),
        Some(v) => Err(Problem::msg(format!(
            "opset {v} is not supported ({} to {})",
            OPSETS.start(),
            OPSETS.end()
        ))),
        None => Err(Problem::msg(
            "not a valid ONNX model (no default-domain opset import)",
        )),
    }
}

/// The static type of a graph input: the model's shape, with `--shape` filling or replacing
/// it. A dimension neither gives is an error naming the input.
fn input_type(input: &ValueInfoProto, given: Option<&[i64]>) -> PResult<TensorType> {
    let place = Place::Input(input.name.clone());
    let tensor_type = match input.type_.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => t,
        Some(_) => return Err(Problem::new(place, "only tensor inputs are supported")),
        None => return Err(Problem::new(place, "has no type")),
    };
    let dtype = tensor::dtype_of(tensor_type.elem_type).map_err(|p| p.at(&place))?;
    let model_dims = tensor_type.shape.as_ref().map(|s| s.dim.as_slice());
    let shape: Vec<i64> = match (given, model_dims) {
        (Some(g), dims) => {
            if let Some(d) = dims {
                if d.len() != g.len() {
                    return Err(Problem::new(
                        place,
                        format!(
                            "has rank {} but --shape gives {} dimensions",
                            d.len(),
                            g.len()
                        ),
                    ));
                }
            }
            if let Some(bad) = g.iter().find(|d| **d < 1) {
                return Err(Problem::new(
                    place,
                    format!("--shape gives dimension {bad}"),
                ));
            }
            g.to_vec()
        }
        (None, None) => {
            return Err(Problem::msg(format!(
                "input '{}' has no shape; give it with --shape {}=...",
                one_line(&input.name),
                one_line(&input.name)
            )))
        }
        (None, Some(dims)) => {
            let static_dim = |d: &onnx_protobuf::tensor_shape_proto::Dimension| {
                if d.has_dim_value() && d.dim_value() > 0 {
                    Some(d.dim_value())
                } else {
                    None
                }
            };
            if let Some(dynamic) = dims.iter().find(|d| static_dim(d).is_none()) {
                let dim_name = match dynamic.dim_param() {
                    "" => "?".to_string(),
                    p => p.to_string(),
                };
                let example: Vec<String> = dims
                    .iter()
                    .map(|d| static_dim(d).unwrap_or(1).to_string())
                    .collect();
                return Err(Problem::msg(format!(
                    "input '{}' has a dynamic dimension '{}'; give it with --shape {}={}",
                    one_line(&input.name),
                    one_line(&dim_name),
                    one_line(&input.name),
                    example.join("x")
                )));
            }
            dims.iter().filter_map(static_dim).collect()
        }
    };
    num_elements(&shape).map_err(|p| p.at(&place))?;
    Ok(TensorType::new(dtype, shape))
}

/// Converts every node; returns, for each binding, the index of the node that produced it.
fn convert_nodes<'m>(cx: &mut Importer<'m, '_>, graph: &'m GraphProto) -> PResult<Vec<usize>> {
    let mut node_of_binding = Vec::new();
    for (index, node) in graph.node.iter().enumerate() {
        let place = Place::Node {
            name: node.name.clone(),
            index,
            op_type: node.op_type.clone(),
        };
        let at = |p: Problem| p.at(&place);
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(Problem::new(
                place.clone(),
                format!("unsupported op (domain '{}')", node.domain),
            ));
        }
        let mut inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                inputs.push(None);
                continue;
            }
            match cx.env.get(name.as_str()) {
                Some(v) => inputs.push(Some(v.clone())),
                None => {
                    return Err(at(Problem::msg(format!(
                        "input '{}' is not defined before this node",
                        one_line(name)
                    ))))
                }
            }
        }
        cx.out_names = node.output.iter().map(|o| sanitize(o)).collect();
        let n = NodeIn {
            proto: node,
            inputs,
            attrs: NodeAttrs::new(&node.attribute),
        };
        let results = convert(cx, &n).map_err(at)?;
        node_of_binding.resize(cx.f.bindings.len(), index);
        for (i, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let Some(v) = results.get(i) else {
                return Err(at(Problem::msg(format!("output #{i} is not supported"))));
            };
            if cx.env.insert(name.as_str(), v.clone()).is_some() {
                return Err(at(Problem::msg(format!(
                    "output '{}' is already defined",
                    one_line(name)
                ))));
            }
        }
    }
    Ok(node_of_binding)
}
