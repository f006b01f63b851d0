//! tgc IR to the worker's task and module JSON (the "Task JSON" section of PROTOCOL.md).

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use tgc_ir::{Attr, Callee, Function, Module, TensorType, ValueId};

fn type_json(t: &TensorType) -> Value {
    json!({ "shape": t.shape.as_slice(), "dtype": t.dtype.tvm_name() })
}

fn attr_json(a: &Attr) -> Value {
    match a {
        Attr::Int(v) => json!(v),
        // Strict JSON has no infinities; the protocol sends them as null.
        Attr::Float(v) if v.is_finite() => json!(v),
        Attr::Float(_) => Value::Null,
        Attr::Str(s) => json!(s),
        Attr::Bool(b) => json!(b),
        Attr::List(l) => Value::Array(l.iter().map(attr_json).collect()),
        Attr::Dict(d) => Value::Object(d.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect()),
    }
}

/// The task JSON of a Primitive function: values numbered params first, then every binding
/// result in order. Fails on a binding that calls another function (a task is ops only).
pub fn task_json(f: &Function) -> Result<Value, String> {
    let mut number: HashMap<ValueId, usize> = HashMap::new();
    let params: Vec<Value> = f
        .params
        .iter()
        .map(|p| {
            number.insert(*p, number.len());
            let mut v = type_json(f.ty(*p));
            v["name"] = json!(f.name_of(*p));
            v
        })
        .collect();
    let mut bindings = Vec::with_capacity(f.bindings.len());
    for b in &f.bindings {
        let Callee::Op(op) = &b.callee else {
            return Err(format!(
                "task @{} calls a function; a task must be ops only",
                f.name
            ));
        };
        let operands: Vec<usize> = b
            .operands
            .iter()
            .map(|o| {
                number
                    .get(o)
                    .copied()
                    .ok_or_else(|| format!("task @{}: operand used before definition", f.name))
            })
            .collect::<Result<_, _>>()?;
        let attrs: Map<String, Value> = b
            .attrs
            .iter()
            .map(|(k, v)| (k.clone(), attr_json(v)))
            .collect();
        let results: Vec<Value> = b.results.iter().map(|r| type_json(f.ty(*r))).collect();
        for r in &b.results {
            number.insert(*r, number.len());
        }
        bindings.push(
            json!({ "op": op.name(), "operands": operands, "attrs": attrs, "results": results }),
        );
    }
    let results: Vec<usize> = f
        .results
        .iter()
        .map(|r| {
            number
                .get(r)
                .copied()
                .ok_or_else(|| format!("task @{}: result is not defined", f.name))
        })
        .collect::<Result<_, _>>()?;
    Ok(json!({ "name": f.name, "params": params, "bindings": bindings, "results": results }))
}

/// The module JSON of `build_and_measure`: main's params, every task function called from
/// main, and main's calls (and constants) in order.
pub fn module_json(m: &Module) -> Result<Value, String> {
    let main = m.function("main").ok_or("the module has no @main")?;
    let mut number: HashMap<ValueId, usize> = HashMap::new();
    let params: Vec<Value> = main
        .params
        .iter()
        .map(|p| {
            number.insert(*p, number.len());
            let mut v = type_json(main.ty(*p));
            v["name"] = json!(main.name_of(*p));
            v
        })
        .collect();
    let mut tasks = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut calls = Vec::new();
    for b in &main.bindings {
        let args: Vec<usize> = b
            .operands
            .iter()
            .map(|o| {
                number
                    .get(o)
                    .copied()
                    .ok_or("@main: operand used before definition")
            })
            .collect::<Result<_, _>>()?;
        match &b.callee {
            Callee::Func(name) => {
                let f = m
                    .function(name)
                    .ok_or_else(|| format!("@main calls undefined @{name}"))?;
                if seen.insert(name.clone()) {
                    tasks.push(task_json(f)?);
                }
                calls.push(json!({ "task": name, "args": args }));
            }
            Callee::Op(op) if op.name() == "constant" => {
                let a = |k: &str| b.attrs.get(k).map(attr_json).unwrap_or(Value::Null);
                calls.push(json!({ "constant": { "value": a("value"), "shape": a("shape"), "dtype": a("dtype") } }));
            }
            Callee::Op(op) => {
                return Err(format!(
                    "@main still applies op '{}': partition the module first",
                    op.name()
                ));
            }
        }
        for r in &b.results {
            number.insert(*r, number.len());
        }
    }
    let results: Vec<usize> = main
        .results
        .iter()
        .map(|r| number.get(r).copied().ok_or("@main: result is not defined"))
        .collect::<Result<_, _>>()?;
    Ok(json!({ "params": params, "tasks": tasks, "calls": calls, "results": results }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tgc_ir::text::parse_module;

    const SRC: &str = r#"module @m {
  func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32> {
    %c = constant() {value = [0.5], shape = [], dtype = "float32"} : tensor<f32>
    %0 = call @fused_conv2d_relu(%x, %w) : tensor<1x4x8x8xf32>
    %1 = call @fused_conv2d_relu(%0, %w) : tensor<1x4x8x8xf32>
    return %1
  }

  func @fused_conv2d_relu(%a: tensor<1x4x8x8xf32>, %b: tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32> attributes {Primitive = true} {
    %0 = nn.conv2d(%a, %b) {padding = [1, 1, 1, 1]} : tensor<1x4x8x8xf32>
    %1 = nn.relu(%0) : tensor<1x4x8x8xf32>
    return %1
  }
}
"#;

    #[test]
    fn task_json_numbers_params_then_results() {
        let m = parse_module(SRC, "t").unwrap();
        let t = task_json(m.function("fused_conv2d_relu").unwrap()).unwrap();
        assert_eq!(
            t["params"][1],
            json!({"name": "b", "shape": [4, 4, 3, 3], "dtype": "float32"})
        );
        assert_eq!(t["bindings"][0]["operands"], json!([0, 1]));
        assert_eq!(t["bindings"][0]["attrs"], json!({"padding": [1, 1, 1, 1]}));
        assert_eq!(t["bindings"][1]["operands"], json!([2]));
        assert_eq!(t["results"], json!([3]));
    }

    #[test]
    fn module_json_lists_each_task_once_and_every_call() {
        let m = parse_module(SRC, "t").unwrap();
        let j = module_json(&m).unwrap();
        assert_eq!(j["tasks"].as_array().unwrap().len(), 1);
        assert_eq!(j["calls"][0]["constant"]["value"], json!([0.5]));
        assert_eq!(
            j["calls"][1],
            json!({"task": "fused_conv2d_relu", "args": [0, 1]})
        );
        assert_eq!(
            j["calls"][2],
            json!({"task": "fused_conv2d_relu", "args": [3, 1]})
        );
        assert_eq!(j["results"], json!([4]));
    }

    #[test]
    fn unpartitioned_main_is_an_error() {
        let src = "module @m {\n  func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n    %0 = nn.relu(%x) : tensor<2xf32>\n    return %0\n  }\n}\n";
        let m = parse_module(src, "t").unwrap();
        assert_eq!(
            module_json(&m).unwrap_err(),
            "@main still applies op 'nn.relu': partition the module first"
        );
    }
}
