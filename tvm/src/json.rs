//! tgc IR to the worker's task and module JSON (the "Task JSON" section of PROTOCOL.md), and
//! the op schema the worker checks that JSON against (`tgc_worker/op_schema.json`, generated
//! here from the op registry so that the worker's op table has one source).

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use tgc_ir::ops::{AttrDefault, Op};
use tgc_ir::{Attr, AttrKind, Callee, Function, Module, TensorType, ValueId};

fn type_json(t: &TensorType) -> Value {
    json!({ "shape": t.shape.as_slice(), "dtype": t.dtype.tvm_name() })
}

fn attr_json(a: &Attr) -> Value {
    match a {
        Attr::Int(v) => json!(v),
        // Strict JSON has no infinities: the protocol spells them as strings.
        Attr::Float(v) if v.is_finite() => json!(v),
        Attr::Float(v) if v.is_nan() => json!("nan"),
        Attr::Float(v) => json!(if *v > 0.0 { "inf" } else { "-inf" }),
        Attr::Str(s) => json!(s),
        Attr::Bool(b) => json!(b),
        Attr::List(l) => Value::Array(l.iter().map(attr_json).collect()),
        Attr::Dict(d) => Value::Object(d.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect()),
    }
}

/// The task JSON of a Primitive function: values numbered params first, then every binding
/// result in order. Every attribute is sent, with the registry's defaults filled in, so that
/// what TVM gets never depends on defaults of the worker's; only optional attributes that are
/// absent stay absent. Fails on a binding that calls another function (a task is ops only).
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
        let attrs: Map<String, Value> = op
            .with_defaults(&b.attrs)
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
    let mut task =
        json!({ "name": f.name, "params": params, "bindings": bindings, "results": results });
    let layout_free = tgc_ir::lowering::layout_free(f);
    if !layout_free.is_empty() {
        task["layout_free"] = json!(layout_free);
    }
    Ok(task)
}

/// Where the worker reads the op schema, relative to this crate.
pub const OP_SCHEMA_PATH: &str = "python/tgc_worker/op_schema.json";

/// The schema's name for an attribute kind.
fn kind_name(k: AttrKind) -> &'static str {
    match k {
        AttrKind::Int => "int",
        AttrKind::Float => "float",
        AttrKind::Str => "str",
        AttrKind::Bool => "bool",
        AttrKind::IntList => "int_list",
        AttrKind::FloatList => "float_list",
        AttrKind::StrList => "str_list",
        AttrKind::IntOrIntList => "int_or_int_list",
        AttrKind::List => "list",
        AttrKind::Dict => "dict",
        AttrKind::Any => "any",
    }
}

/// The text of `tgc_worker/op_schema.json`: for every registered op, in declaration order,
/// its name, operand counts (`max_operands` null: variadic), whether LegalizeOps writes a
/// rank-0 constant operand into the TIR (`inlines_scalar_constant`), and its attributes with
/// kind and presence: `defaulted` (with the `default` that [`task_json`] fills in),
/// `required`, or `optional` (may be absent). One op and one attribute a line, so that a
/// change to the registry is a readable diff of the checked-in file.
pub fn op_schema() -> String {
    let q = |s: &str| Value::from(s).to_string();
    let mut ops = Vec::new();
    for op in Op::all() {
        let def = op.def();
        let attrs: Vec<String> = def
            .attrs
            .iter()
            .map(|a| {
                let presence = match (a.default, a.default.value()) {
                    (_, Some(v)) => {
                        format!(r#""presence": "defaulted", "default": {}"#, attr_json(&v))
                    }
                    (AttrDefault::Required, None) => r#""presence": "required""#.to_string(),
                    (_, None) => r#""presence": "optional""#.to_string(),
                };
                format!(
                    r#"      {{"name": {}, "kind": {}, {presence}}}"#,
                    q(a.name),
                    q(kind_name(a.kind))
                )
            })
            .collect();
        let attrs = if attrs.is_empty() {
            "[]".to_string()
        } else {
            format!("[\n{}\n    ]", attrs.join(",\n"))
        };
        let max = def.inputs.max.map_or("null".to_string(), |m| m.to_string());
        ops.push(format!(
            r#"    {{"name": {}, "min_operands": {}, "max_operands": {max}, "inlines_scalar_constant": {}, "attrs": {attrs}}}"#,
            q(def.name),
            def.inputs.min,
            def.inlines_scalar_constant,
        ));
    }
    format!(
        "{{\n  \"about\": {},\n  \"ops\": [\n{}\n  ]\n}}\n",
        q(
            "The op registry (ir/src/ops/table.rs) as the TVM worker reads it. Generated: \
           regenerate with `TGC_BLESS=1 cargo test -p tgc-tvm op_schema`, never edit by hand."
        ),
        ops.join(",\n")
    )
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
        // every attribute but the absent optional ones (out_layout, out_dtype), defaults filled
        assert_eq!(
            t["bindings"][0]["attrs"],
            json!({"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
                   "data_layout": "NCHW", "kernel_layout": "OIHW"})
        );
        assert_eq!(t["bindings"][1]["attrs"], json!({}));
        assert_eq!(t["bindings"][1]["operands"], json!([2]));
        assert_eq!(t["results"], json!([3]));
    }

    #[test]
    fn task_json_lists_layout_free_params_only_when_there_are_some() {
        let m = parse_module(SRC, "t").unwrap();
        let mut f = m.function("fused_conv2d_relu").unwrap().clone();
        assert!(task_json(&f).unwrap().get("layout_free").is_none());
        f.attrs.insert(
            tgc_ir::lowering::LAYOUT_FREE_ATTR.into(),
            Attr::List(vec![Attr::Int(1)]),
        );
        assert_eq!(task_json(&f).unwrap()["layout_free"], json!([1]));
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

    #[test]
    fn task_json_sends_given_attributes_and_fills_in_defaults() {
        let src = "module @m {\n  func @f(%x: tensor<2x3xf32>) -> tensor<2xf32> attributes {Primitive = true} {\n    %0 = sum(%x) {axis = [1]} : tensor<2xf32>\n    %1 = clip(%0) {min = -inf, max = 6.0} : tensor<2xf32>\n    return %1\n  }\n}\n";
        let m = parse_module(src, "t").unwrap();
        let t = task_json(m.function("f").unwrap()).unwrap();
        // `axis` is optional and given, `keepdims` absent and filled in
        assert_eq!(
            t["bindings"][0]["attrs"],
            json!({"axis": [1], "keepdims": false})
        );
        // strict JSON has no infinities: the protocol spells them as strings
        assert_eq!(
            t["bindings"][1]["attrs"],
            json!({"min": "-inf", "max": 6.0})
        );
    }

    /// The worker's op table is read from `tgc_worker/op_schema.json`; this keeps that file
    /// equal to the registry. `TGC_BLESS=1` rewrites it instead of failing.
    #[test]
    fn op_schema_file_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(OP_SCHEMA_PATH);
        let want = op_schema();
        if std::env::var_os("TGC_BLESS").is_some() {
            std::fs::write(&path, &want).expect("write the op schema");
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            let line = have
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| have.lines().count().min(want.lines().count()))
                + 1;
            panic!(
                "tvm/{OP_SCHEMA_PATH} is stale (first difference at line {line}): regenerate it \
                 with `TGC_BLESS=1 cargo test -p tgc-tvm op_schema`"
            );
        }
    }

    #[test]
    fn op_schema_is_json_with_every_op_and_default() {
        let schema: Value = serde_json::from_str(&op_schema()).expect("the schema is JSON");
        let ops = schema["ops"].as_array().unwrap();
        assert_eq!(ops.len(), Op::all().count());
        let conv = &ops[0];
        assert_eq!(conv["name"], "nn.conv2d");
        assert_eq!(
            (&conv["min_operands"], &conv["max_operands"]),
            (&json!(2), &json!(2))
        );
        assert_eq!(
            conv["attrs"][0],
            json!({"name": "strides", "kind": "int_list", "presence": "defaulted", "default": [1, 1]})
        );
        let by_name = |n: &str| ops.iter().find(|o| o["name"] == n).unwrap();
        assert_eq!(by_name("concat")["max_operands"], Value::Null);
        assert_eq!(by_name("add")["inlines_scalar_constant"], true);
        assert_eq!(by_name("where")["inlines_scalar_constant"], false);
        assert_eq!(
            by_name("nn.max_pool2d")["attrs"][0],
            json!({"name": "pool_size", "kind": "int_list", "presence": "required"})
        );
        assert_eq!(
            by_name("take")["attrs"][0],
            json!({"name": "axis", "kind": "int", "presence": "optional"})
        );
        assert_eq!(by_name("nn.batch_norm")["attrs"][1]["default"], json!(1e-5));
        assert_eq!(by_name("split")["attrs"][0]["kind"], "int_or_int_list");
    }
}
