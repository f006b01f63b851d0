//! Round trip of the text format: printing then parsing gives a structurally equal module,
//! and printing a parsed printed text gives the same text. Hand-written cases pin the
//! canonical spelling; a proptest covers random modules.

use proptest::prelude::*;
use tgc_ir::text::{parse_module, print_function, print_module};
use tgc_ir::{Attr, Attrs, Binding, Callee, DType, Function, Module, Op, TensorType, ValueId};

fn parse(src: &str) -> Module {
    parse_module(src, "test.tgc").unwrap_or_else(|e| panic!("{e}\n--- input ---\n{src}"))
}

/// The text is canonical: it parses and prints back to itself.
fn assert_canonical(src: &str) {
    let m = parse(src);
    assert_eq!(print_module(&m), src);
    assert!(parse(&print_module(&m)).structurally_equal(&m));
}

fn t(dtype: DType, shape: &[i64]) -> TensorType {
    TensorType::new(dtype, shape.iter().copied())
}

#[test]
fn example_module_with_comments_prints_canonically() {
    let src = r#"// a model, with comments
module @resnet attributes {source = "keras-resnet50.onnx"} { // trailing comment
  func @main(%x: tensor<1x3x224x224xf32>, %w: tensor<1x3x224x224xf32>) -> tensor<1x3x224x224xf32> attributes {Primitive = true} {
    // "strings" in comments are skipped
    %0 = add(%x, %w) : tensor<1x3x224x224xf32>
    %1, %2 = call @pair(%0, %w) : (tensor<1x3x224x224xf32>, tensor<1x3x224x224xf32>)
    %3 = clip(%1) {min = 0.0, max = 6.0} : (tensor<1x3x224x224xf32>)
    return %3
  }

  func @pair(%a: tensor<1x3x224x224xf32>, %b: tensor<1x3x224x224xf32>) -> (tensor<1x3x224x224xf32>, tensor<1x3x224x224xf32>) {
    %0 = nn.relu(%a) : tensor<1x3x224x224xf32>
    return %0, %b
  }
}
"#;
    let expected = r#"module @resnet attributes {source = "keras-resnet50.onnx"} {
  func @main(%x: tensor<1x3x224x224xf32>, %w: tensor<1x3x224x224xf32>) -> tensor<1x3x224x224xf32> attributes {Primitive = true} {
    %0 = add(%x, %w) : tensor<1x3x224x224xf32>
    %1, %2 = call @pair(%0, %w) : (tensor<1x3x224x224xf32>, tensor<1x3x224x224xf32>)
    %3 = clip(%1) {min = 0.0, max = 6.0} : tensor<1x3x224x224xf32>
    return %3
  }

  func @pair(%a: tensor<1x3x224x224xf32>, %b: tensor<1x3x224x224xf32>) -> (tensor<1x3x224x224xf32>, tensor<1x3x224x224xf32>) {
    %0 = nn.relu(%a) : tensor<1x3x224x224xf32>
    return %0, %b
  }
}
"#;
    let m = parse(src);
    assert_eq!(print_module(&m), expected);
    assert_eq!(m.to_string(), expected);
    assert_canonical(expected);

    let main = m.function("main").unwrap();
    assert!(main.is_primitive());
    assert_eq!(main.bindings.len(), 3);
    assert_eq!(main.bindings[1].callee, Callee::Func("pair".into()));
    assert_eq!(
        main.bindings[2].callee,
        Callee::Op(Op::lookup("clip").unwrap())
    );
    assert_eq!(main.bindings[2].attrs["max"], Attr::Float(6.0));
    assert_eq!(m.attrs["source"], Attr::str("keras-resnet50.onnx"));
}

#[test]
fn canonical_texts_print_back_to_themselves() {
    let cases = [
        "module @empty {\n}\n",
        "module @m {\n  func @f() -> () {\n    return\n  }\n}\n",
        // Zero params, a scalar, zero-sized dims, every dtype spelling.
        "module @m {\n  func @f(%a: tensor<0x3xi1>, %b: tensor<i8>, %c: tensor<2xu64>) -> (tensor<0x3xi1>, tensor<i8>) {\n    return %a, %b\n  }\n}\n",
        "module @m {\n  func @f(%a: tensor<bf16>, %b: tensor<f16>, %c: tensor<f64>, %d: tensor<i16>, %e: tensor<i32>, %g: tensor<i64>, %h: tensor<u8>, %i: tensor<u16>, %j: tensor<u32>) -> tensor<bf16> {\n    return %a\n  }\n}\n",
        // A binding without results, and a call of a function defined earlier.
        "module @m {\n  func @g(%x: tensor<4xf32>) -> () {\n    return\n  }\n\n  func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n    call @g(%x) : ()\n    nn.relu(%x) : ()\n    return %x\n  }\n}\n",
        // Names: all digits, dots, underscores, and quoted ones.
        "module @\"my model\" {\n  func @\"fused/conv:0\"(%\"in put\": tensor<f32>, %0.a_b: tensor<f32>) -> tensor<f32> {\n    %\"\" = add(%\"in put\", %0.a_b) : tensor<f32>\n    %007 = call @\"fused/conv:0\"(%\"\", %\"\") : tensor<f32>\n    return %007\n  }\n}\n",
        // Attributes of every kind, nested, empty, quoted keys.
        r#"module @m attributes {a = 1, "quoted key" = -3, "" = [], d = {}, e.f_g = {x = [1, [2.5, "s"], {y = true}]}} {
  func @f(%x: tensor<2xf32>) -> tensor<2xf32> attributes {Primitive = true, b = false} {
    %y = clip(%x) {min = -0.0, max = 1e-300, list = [nan, inf, -inf, 1.7976931348623157e308, 5e-324, -9223372036854775808, 9223372036854775807]} : tensor<2xf32>
    return %y
  }
}
"#,
        // String escapes and unicode.
        "module @m attributes {s = \"q\\\"b\\\\n\\nt\\t\\u{0}\\u{1b}\\u{7f}\\u{85} é 日本 😀\"} {\n}\n",
    ];
    for case in cases {
        assert_canonical(case);
    }
}

#[test]
fn accepted_variations_print_canonically() {
    let loose = "module @m{func @f(%x:tensor<3xf32>)->(tensor<3xf32>)attributes{k=1}{%y=nn.relu(%x){}:(tensor<3xf32>)\nreturn %y}}";
    let canonical = "module @m {\n  func @f(%x: tensor<3xf32>) -> tensor<3xf32> attributes {k = 1} {\n    %y = nn.relu(%x) : tensor<3xf32>\n    return %y\n  }\n}\n";
    assert_eq!(print_module(&parse(loose)), canonical);
    // Empty attribute dictionaries are dropped; quoted identifier-like keys print bare;
    // quoted plain names print bare; `\r` reads as a carriage return.
    let loose = "module @\"m\" attributes {} {\n  func @f() -> () attributes {\"k\" = \"a\\rb\"} {\n    return\n  }\n}\n";
    let canonical =
        "module @m {\n  func @f() -> () attributes {k = \"a\\u{d}b\"} {\n    return\n  }\n}\n";
    assert_eq!(print_module(&parse(loose)), canonical);
}

#[test]
fn calls_may_precede_their_callee() {
    let src = "module @m {\n  func @main(%x: tensor<f32>) -> tensor<f32> {\n    %0 = call @later(%x) : tensor<f32>\n    return %0\n  }\n\n  func @later(%x: tensor<f32>) -> tensor<f32> {\n    return %x\n  }\n}\n";
    assert_canonical(src);
}

#[test]
fn value_names_are_kept_exactly() {
    let src = "module @m {\n  func @f(%x: tensor<f32>) -> tensor<f32> {\n    %3 = nn.relu(%x) : tensor<f32>\n    %1 = nn.relu(%3) : tensor<f32>\n    return %1\n  }\n}\n";
    let m = parse(src);
    let f = m.function("f").unwrap();
    assert_eq!(f.name_of(f.bindings[0].results[0]), "3");
    assert_eq!(f.name_of(f.results[0]), "1");
    assert_eq!(f.name_of(f.params[0]), "x");
}

#[test]
fn floats_round_trip_bit_exactly() {
    let values = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        1e-300,
        1e300,
        1e16,
        123456789012345680.0,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        f64::EPSILON,
        5e-324,
        -5e-324,
        2.225073858507201e-308, // largest subnormal
        f64::INFINITY,
        f64::NEG_INFINITY,
        std::f64::consts::PI,
    ];
    let mut m = Module::new("floats");
    m.attrs.insert("v".into(), Attr::floats(values));
    m.attrs.insert("nan".into(), Attr::Float(f64::NAN));
    let parsed = parse(&print_module(&m));
    let got = parsed.attrs["v"].as_floats().unwrap();
    for (a, b) in values.iter().zip(&got) {
        assert_eq!(a.to_bits(), b.to_bits(), "{a:?} read back as {b:?}");
    }
    assert!(matches!(parsed.attrs["nan"], Attr::Float(x) if x.is_nan()));
    // Ints stay ints and floats stay floats.
    let m = parse("module @m attributes {i = 1, f = 1.0, e = 1e5} {\n}\n");
    assert_eq!(m.attrs["i"], Attr::Int(1));
    assert_eq!(m.attrs["f"], Attr::Float(1.0));
    assert_eq!(m.attrs["e"], Attr::Float(1e5));
}

#[test]
fn print_function_is_unindented() {
    let m = parse("module @m {\n  func @f(%x: tensor<f32>) -> tensor<f32> {\n    %0 = nn.relu(%x) : tensor<f32>\n    return %0\n  }\n}\n");
    assert_eq!(
        print_function(m.function("f").unwrap()),
        "func @f(%x: tensor<f32>) -> tensor<f32> {\n  %0 = nn.relu(%x) : tensor<f32>\n  return %0\n}\n"
    );
}

#[test]
fn built_module_round_trips() {
    let ty = t(DType::F32, &[1, 64, 56, 56]);
    let mut f = Function::new("main");
    let x = f.add_param(Some("x"), ty.clone());
    let y = f.add_param(None, ty.clone());
    let add = Op::lookup("add").unwrap();
    let relu = Op::lookup("nn.relu").unwrap();
    let s = f.push_binding(Callee::Op(add), &[x, y], Attrs::new(), vec![ty.clone()]);
    let r = f.push_binding(Callee::Op(relu), &[s[0]], Attrs::new(), vec![ty.clone()]);
    f.results = r.clone();
    let mut m = Module::new("built");
    m.add_function(f).unwrap();
    let text = print_module(&m);
    assert!(parse(&text).structurally_equal(&m));
    assert_eq!(print_module(&parse(&text)), text);
}

#[test]
fn large_module_parses_and_prints_quickly() {
    let ty = t(DType::F32, &[1, 64, 56, 56]);
    let mut f = Function::new("main");
    let mut last: ValueId = f.add_param(Some("x"), ty.clone());
    let relu = Op::lookup("nn.relu").unwrap();
    let clip = Op::lookup("clip").unwrap();
    for i in 0..10_000 {
        let (op, attrs) = if i % 2 == 0 {
            (relu, Attrs::new())
        } else {
            let mut a = Attrs::new();
            a.insert("min".into(), Attr::Float(0.0));
            a.insert("max".into(), Attr::Float(6.0));
            (clip, a)
        };
        last = f.push_binding(Callee::Op(op), &[last], attrs, vec![ty.clone()])[0];
    }
    f.results.push(last);
    let mut m = Module::new("big");
    m.add_function(f).unwrap();
    let text = print_module(&m);
    let parsed = parse(&text);
    assert_eq!(parsed.num_bindings(), 10_000);
    assert!(parsed.structurally_equal(&m));
}

// ---- random modules ----

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::ALL.to_vec())
}

fn tensor_type() -> impl Strategy<Value = TensorType> {
    let dim = prop_oneof![8 => 0i64..8, 1 => Just(224i64), 1 => 0i64..=i64::MAX];
    (dtype(), prop::collection::vec(dim, 0..5)).prop_map(|(d, s)| TensorType::new(d, s))
}

fn tricky_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => any::<f64>(),
        1 => -1e6f64..1e6,
        2 => prop::sample::select(vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-300,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            5e-324,
            -2.2250738585072e-310,
            1e16,
            0.1,
        ]),
    ]
}

/// Strings heavy in what needs escaping: quotes, backslashes, newlines, control and
/// non-ASCII characters, and the format's own punctuation.
fn tricky_string() -> impl Strategy<Value = String> {
    let pool = vec![
        'a', 'Z', '0', '_', '.', ' ', '"', '\\', '\n', '\t', '\r', '\0', '\u{1b}', '\u{7f}',
        '\u{85}', '\u{2028}', 'é', '日', '😀', '{', '}', '%', '@', '/', '=', ',', '-',
    ];
    prop_oneof![
        prop::collection::vec(prop::sample::select(pool), 0..10).prop_map(String::from_iter),
        any::<String>(),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[A-Za-z0-9_.]{1,6}", 1 => tricky_string()]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[A-Za-z_][A-Za-z0-9_.]{0,6}", 1 => tricky_string()]
}

fn attr() -> impl Strategy<Value = Attr> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Attr::Int),
        tricky_float().prop_map(Attr::Float),
        tricky_string().prop_map(Attr::Str),
        any::<bool>().prop_map(Attr::Bool),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Attr::List),
            prop::collection::vec((key(), inner), 0..4)
                .prop_map(|kv| Attr::Dict(kv.into_iter().collect())),
        ]
    })
}

fn attrs() -> impl Strategy<Value = Attrs> {
    prop_oneof![
        1 => Just(Attrs::new()),
        1 => prop::collection::vec((key(), attr()), 1..4).prop_map(|kv| kv.into_iter().collect()),
    ]
}

#[derive(Clone, Debug)]
struct BindingSpec {
    /// Seed choosing a later function to call, if a call is possible with the values at hand.
    call: Option<usize>,
    op: usize,
    operands: Vec<usize>,
    result_types: Vec<TensorType>,
    names: Vec<Option<String>>,
    attrs: Attrs,
}

#[derive(Clone, Debug)]
struct FunctionSpec {
    name: String,
    params: Vec<(Option<String>, TensorType)>,
    bindings: Vec<BindingSpec>,
    results: Vec<usize>,
    attrs: Attrs,
}

#[derive(Clone, Debug)]
struct ModuleSpec {
    name: String,
    attrs: Attrs,
    functions: Vec<FunctionSpec>,
}

fn binding_spec() -> impl Strategy<Value = BindingSpec> {
    let result_types = prop_oneof![
        6 => prop::collection::vec(tensor_type(), 1..=1),
        2 => prop::collection::vec(tensor_type(), 2..4),
        1 => Just(Vec::new()),
    ];
    (
        prop::option::weighted(0.3, any::<usize>()),
        any::<usize>(),
        prop::collection::vec(any::<usize>(), 0..4),
        result_types,
        prop::collection::vec(prop::option::of(name()), 4),
        attrs(),
    )
        .prop_map(
            |(call, op, operands, result_types, names, attrs)| BindingSpec {
                call,
                op,
                operands,
                result_types,
                names,
                attrs,
            },
        )
}

fn function_spec() -> impl Strategy<Value = FunctionSpec> {
    (
        name(),
        prop::collection::vec((prop::option::of(name()), tensor_type()), 0..4),
        prop::collection::vec(binding_spec(), 0..10),
        prop::collection::vec(any::<usize>(), 0..3),
        attrs(),
    )
        .prop_map(|(name, params, bindings, results, attrs)| FunctionSpec {
            name,
            params,
            bindings,
            results,
            attrs,
        })
}

fn module_spec() -> impl Strategy<Value = ModuleSpec> {
    (
        name(),
        attrs(),
        prop::collection::vec(function_spec(), 0..5),
    )
        .prop_map(|(name, attrs, functions)| ModuleSpec {
            name,
            attrs,
            functions,
        })
}

/// Builds the module a spec describes. Function `i` may call any function after it (so calls
/// precede their callees in the text); call operands are picked among the values of the
/// callee's parameter types, so calls are well typed.
fn build(spec: &ModuleSpec) -> Module {
    let ops: Vec<Op> = Op::all().collect();
    let mut names: Vec<String> = Vec::new();
    for fs in &spec.functions {
        let mut n = fs.name.clone();
        while names.contains(&n) {
            n.push('_');
        }
        names.push(n);
    }
    let count = spec.functions.len();
    let mut built: Vec<Option<Function>> = vec![None; count];
    for i in (0..count).rev() {
        let fs = &spec.functions[i];
        let mut f = Function::new(names[i].clone());
        let mut avail: Vec<ValueId> = Vec::new();
        for (hint, ty) in &fs.params {
            avail.push(f.add_param(hint.as_deref(), ty.clone()));
        }
        for b in &fs.bindings {
            let mut call = None;
            if let (Some(seed), true) = (b.call, i + 1 < count) {
                let j = i + 1 + seed % (count - i - 1);
                let g = built[j].as_ref().expect("later functions are built first");
                let operands: Option<Vec<ValueId>> = g
                    .param_types()
                    .iter()
                    .enumerate()
                    .map(|(k, ty)| {
                        let fits: Vec<ValueId> =
                            avail.iter().copied().filter(|v| f.ty(*v) == ty).collect();
                        let pick = b.operands.get(k).copied().unwrap_or(seed);
                        (!fits.is_empty()).then(|| fits[pick % fits.len()])
                    })
                    .collect();
                if let Some(operands) = operands {
                    call = Some((Callee::Func(names[j].clone()), operands, g.result_types()));
                }
            }
            let (callee, operands, types) = call.unwrap_or_else(|| {
                let operands = if avail.is_empty() {
                    Vec::new()
                } else {
                    b.operands.iter().map(|s| avail[s % avail.len()]).collect()
                };
                (
                    Callee::Op(ops[b.op % ops.len()]),
                    operands,
                    b.result_types.clone(),
                )
            });
            let results: smallvec::SmallVec<[ValueId; 1]> = types
                .into_iter()
                .enumerate()
                .map(|(k, ty)| f.new_value(b.names.get(k).cloned().flatten().as_deref(), ty))
                .collect();
            avail.extend(results.iter().copied());
            f.push(Binding {
                results,
                callee,
                operands: operands.into_iter().collect(),
                attrs: b.attrs.clone(),
            });
        }
        if !avail.is_empty() {
            f.results = fs.results.iter().map(|s| avail[s % avail.len()]).collect();
        }
        f.attrs = fs.attrs.clone();
        built[i] = Some(f);
    }
    let mut m = Module::new(spec.name.clone());
    m.attrs = spec.attrs.clone();
    for f in built.into_iter().flatten() {
        m.add_function(f).expect("names are unique");
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_modules_round_trip(spec in module_spec()) {
        let m = build(&spec);
        let text = print_module(&m);
        let parsed = parse_module(&text, "random.tgc")
            .map_err(|e| TestCaseError::fail(format!("{e}\n--- text ---\n{text}")))?;
        prop_assert!(parsed.structurally_equal(&m), "not structurally equal:\n{}", text);
        prop_assert_eq!(print_module(&parsed), text);
    }
}
