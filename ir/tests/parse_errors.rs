//! Malformed text gives one exact `file:line:col: message` error, and no input makes the
//! parser panic.

use proptest::prelude::*;
use tgc_ir::text::{parse_module, print_module, ParseError};

/// Wraps `body` (the lines of one function body) in a module with a function `@f` taking
/// `%x: tensor<2xf32>` and returning one `tensor<2xf32>`. The body starts on line 3.
fn in_function(body: &str) -> String {
    format!("module @m {{\n  func @f(%x: tensor<2xf32>) -> tensor<2xf32> {{\n{body}  }}\n}}\n")
}

fn error(src: &str) -> String {
    match parse_module(src, "bad.tgc") {
        Ok(m) => panic!("parsed without error:\n{src}\nas\n{}", print_module(&m)),
        Err(e) => e.to_string(),
    }
}

#[track_caller]
fn check(src: &str, expected: &str) {
    assert_eq!(error(src), expected, "input:\n{src}");
}

#[test]
fn error_fields_and_display() {
    let e: ParseError = parse_module("module @m {\n  fun\n}\n", "x.tgc").unwrap_err();
    assert_eq!((e.file.as_str(), e.line, e.col), ("x.tgc", 2, 3));
    assert_eq!(
        e.message,
        "expected 'func' or '}' to close the module, found 'fun'"
    );
    assert_eq!(
        e.to_string(),
        "x.tgc:2:3: expected 'func' or '}' to close the module, found 'fun'"
    );
    let as_error: &dyn std::error::Error = &e;
    assert!(as_error.source().is_none());
}

#[test]
fn param_missing_colon() {
    check(
        "module @m {\n  func @f(%x = tensor<f32>) -> () {\n    return\n  }\n}\n",
        "bad.tgc:2:14: expected ':' after value name, found '='",
    );
}

#[test]
fn unknown_op() {
    check(
        &in_function("    %0 = nn.conv3x(%x) : tensor<2xf32>\n    return %0\n"),
        "bad.tgc:3:10: unknown op 'nn.conv3x'",
    );
}

#[test]
fn undefined_value() {
    check(
        &in_function("    %0 = add(%x, %7) : tensor<2xf32>\n    return %0\n"),
        "bad.tgc:3:18: use of undefined value '%7'",
    );
    // A binding cannot use its own result.
    check(
        &in_function("    %y = nn.relu(%y) : tensor<2xf32>\n    return %y\n"),
        "bad.tgc:3:18: use of undefined value '%y'",
    );
    check(
        &in_function("    return %nope\n"),
        "bad.tgc:3:12: use of undefined value '%nope'",
    );
}

#[test]
fn redefinition_of_value() {
    check(
        &in_function("    %x = nn.relu(%x) : tensor<2xf32>\n    return %x\n"),
        "bad.tgc:3:5: redefinition of value '%x'",
    );
    check(
        &in_function("    %a, %a = nn.relu(%x) : (tensor<2xf32>, tensor<2xf32>)\n    return %a\n"),
        "bad.tgc:3:9: redefinition of value '%a'",
    );
    check(
        "module @m {\n  func @f(%x: tensor<f32>, %x: tensor<f32>) -> () {\n    return\n  }\n}\n",
        "bad.tgc:2:28: redefinition of value '%x'",
    );
}

#[test]
fn unknown_dtype() {
    check(
        "module @m {\n  func @f(%x: tensor<1x3xf33>) -> () {\n    return\n  }\n}\n",
        "bad.tgc:2:26: unknown dtype 'f33'",
    );
    check(
        "module @m {\n  func @f(%x: tensor<float32>) -> () {\n    return\n  }\n}\n",
        "bad.tgc:2:22: unknown dtype 'float32'",
    );
}

#[test]
fn bad_types() {
    let with_param =
        |ty: &str| format!("module @m {{\n  func @f(%x: {ty}) -> () {{\n    return\n  }}\n}}\n");
    check(
        &with_param("tensor<1x3>"),
        "bad.tgc:2:24: expected dtype after dimensions in tensor type, found '3'",
    );
    check(
        &with_param("tensor<1x-3xf32>"),
        "bad.tgc:2:24: expected dtype after 'x' in tensor type, found '-3xf32'",
    );
    check(
        &with_param("tensor<1y3xf32>"),
        "bad.tgc:2:22: invalid dimension '1y3' in tensor type",
    );
    check(
        &with_param("tensor<99999999999999999999xf32>"),
        "bad.tgc:2:22: dimension '99999999999999999999' out of range in tensor type",
    );
    check(
        &with_param("tensor<>"),
        "bad.tgc:2:22: expected shape and dtype in tensor type, found '>'",
    );
    check(
        &with_param("tensor<f32"),
        "bad.tgc:2:25: expected '>' to close tensor type, found ')'",
    );
    check(
        &with_param("f32"),
        "bad.tgc:2:15: expected tensor type, found 'f32'",
    );
    check(
        &with_param("tensor"),
        "bad.tgc:2:21: expected '<' after 'tensor', found ')'",
    );
}

#[test]
fn binding_result_type_count() {
    check(
        &in_function("    %a, %b = nn.relu(%x) : tensor<2xf32>\n    return %a\n"),
        "bad.tgc:3:28: binding defines 2 values but declares 1 type",
    );
    check(
        &in_function("    nn.relu(%x) : tensor<2xf32>\n    return %x\n"),
        "bad.tgc:3:19: binding defines 0 values but declares 1 type",
    );
}

#[test]
fn call_of_undefined_function() {
    check(
        &in_function("    %0 = call @foo(%x) : tensor<2xf32>\n    return %0\n"),
        "bad.tgc:3:15: call of undefined function '@foo'",
    );
}

#[test]
fn return_count_and_type_mismatch() {
    check(
        "module @m {\n  func @main(%x: tensor<f32>) -> tensor<f32> {\n    return %x, %x\n  }\n}\n",
        "bad.tgc:3:5: function '@main' returns 2 values but its signature declares 1",
    );
    check(
        &in_function("    return\n"),
        "bad.tgc:3:5: function '@f' returns 0 values but its signature declares 1",
    );
    check(
        "module @m {\n  func @f(%x: tensor<2xf16>) -> tensor<2xf32> {\n    return %x\n  }\n}\n",
        "bad.tgc:3:12: return value '%x' has type tensor<2xf16> but the signature declares tensor<2xf32>",
    );
}

#[test]
fn duplicate_function() {
    check(
        "module @m {\n  func @f() -> () {\n    return\n  }\n\n  func @f() -> () {\n    return\n  }\n}\n",
        "bad.tgc:6:8: redefinition of function '@f'",
    );
}

#[test]
fn strings() {
    check(
        "module @m attributes {s = \"abc} {\n}\n",
        "bad.tgc:1:27: unterminated string",
    );
    check(
        "module @m attributes {s = \"abc",
        "bad.tgc:1:27: unterminated string",
    );
    check(
        "module @m attributes {s = \"a\\qb\"} {\n}\n",
        "bad.tgc:1:29: unknown escape sequence '\\q'",
    );
    check(
        "module @m attributes {s = \"\\u{110000}\"} {\n}\n",
        "bad.tgc:1:28: invalid unicode scalar value '\\u{110000}'",
    );
    check(
        "module @m attributes {s = \"\\u{}\"} {\n}\n",
        "bad.tgc:1:28: invalid unicode escape, expected '\\u{' 1 to 6 hex digits '}'",
    );
}

#[test]
fn bad_numbers() {
    check(
        "module @m attributes {a = 12abc} {\n}\n",
        "bad.tgc:1:27: invalid number '12abc'",
    );
    check(
        "module @m attributes {a = 1.5.2} {\n}\n",
        "bad.tgc:1:27: invalid number '1.5.2'",
    );
    check(
        "module @m attributes {a = 1e} {\n}\n",
        "bad.tgc:1:27: invalid number '1e'",
    );
    check(
        "module @m attributes {a = 9223372036854775808} {\n}\n",
        "bad.tgc:1:27: integer '9223372036854775808' out of range",
    );
    check(
        "module @m attributes {a = -nan} {\n}\n",
        "bad.tgc:1:28: expected 'inf' after '-', found 'nan'",
    );
    check(
        "module @m attributes {a = maybe} {\n}\n",
        "bad.tgc:1:27: expected attribute value, found 'maybe'",
    );
}

#[test]
fn bad_attribute_dictionaries() {
    check(
        "module @m attributes {a = 1, a = 2} {\n}\n",
        "bad.tgc:1:30: duplicate attribute 'a'",
    );
    check(
        "module @m attributes {a = 1,} {\n}\n",
        "bad.tgc:1:29: expected attribute name, found '}'",
    );
    check(
        "module @m attributes {a 1} {\n}\n",
        "bad.tgc:1:25: expected '=' after attribute name, found '1'",
    );
    check(
        "module @m attributes {a = [1 2]} {\n}\n",
        "bad.tgc:1:30: expected ',' or ']' after list element, found '2'",
    );
    let deep = format!(
        "module @m attributes {{a = {}1{}}} {{\n}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    check(
        &deep,
        "bad.tgc:1:155: attributes nested deeper than 128 levels",
    );
}

#[test]
fn missing_braces_and_truncation() {
    check("", "bad.tgc:1:1: expected 'module', found end of input");
    check(
        "module @m {\n",
        "bad.tgc:2:1: expected 'func' or '}' to close the module, found end of input",
    );
    check(
        "module @m {\n  func @f() -> () {\n    return\n}\n",
        "bad.tgc:5:1: expected 'func' or '}' to close the module, found end of input",
    );
    check(
        "module @m {\n  func @f() -> () {\n    return\n\n  func @g() -> () {\n",
        "bad.tgc:5:3: expected '}' after return, found 'func'",
    );
    check(
        "module @m {\n  func @f(%x: tensor<f32>) -> tensor<f32> {\n    %0 = add(%x,",
        "bad.tgc:3:17: expected operand, found end of input",
    );
    check(
        &in_function("    %0 = add(%x, %x)\n    return %0\n"),
        "bad.tgc:4:5: expected ':' and result types, found 'return'",
    );
    check(
        &in_function(""),
        "bad.tgc:3:3: expected binding or 'return', found '}'",
    );
    check(
        "module @m {\n  func @f( -> () {\n",
        "bad.tgc:2:12: expected parameter name, found '->'",
    );
    check(
        "module @m {\n  func @f() {\n",
        "bad.tgc:2:13: expected '->' after parameter list, found '{'",
    );
    check(
        "module {\n}\n",
        "bad.tgc:1:8: expected module name '@name' after 'module', found '{'",
    );
}

#[test]
fn stray_tokens() {
    check(
        "module @m {\n}\n}\n",
        "bad.tgc:3:1: expected end of input after the module, found '}'",
    );
    check(
        "module @m {\n} extra",
        "bad.tgc:2:3: expected end of input after the module, found 'extra'",
    );
    check(
        &in_function("    $ = 1\n"),
        "bad.tgc:3:5: unexpected character '$'",
    );
    check(
        &in_function("    %0 = add(%x, %x) : tensor<2xf32> %1\n    return %0\n"),
        "bad.tgc:4:5: expected '=' or ',' after result name, found 'return'",
    );
    check(
        &in_function("    % = 1\n"),
        "bad.tgc:3:5: expected value name after '%'",
    );
    // Raw control characters in a quoted token are escaped, keeping the message on one line.
    check(
        "module @m attributes {a \"x\ry\"} {\n}\n",
        "bad.tgc:1:25: expected '=' after attribute name, found '\"x\\ry\"'",
    );
    check(
        &in_function("    = add(%x, %x) : tensor<2xf32>\n"),
        "bad.tgc:3:5: expected binding or 'return', found '='",
    );
}

#[test]
fn columns_count_characters_and_comments_count_lines() {
    check(
        "// é 日本\nmodule @m attributes {s = \"日本\", t = é} {\n}\n",
        "bad.tgc:2:37: unexpected character 'é'",
    );
    check(
        "// a\n// b \"unterminated\nmodule @m {\n  bogus\n}\n",
        "bad.tgc:4:3: expected 'func' or '}' to close the module, found 'bogus'",
    );
}

// ---- no input makes the parser panic ----

const VALID: &str = r#"// header
module @m attributes {source = "a \"b\" \u{1b}", n = [1, -2, 3.5e-7, nan, -inf], d = {k = {}}} {
  func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<f32>) -> tensor<1x3x8x8xf32> attributes {Primitive = true} {
    %0 = add(%x, %x) : tensor<1x3x8x8xf32>
    %1, %2 = call @pair(%0) : (tensor<1x3x8x8xf32>, tensor<1x3x8x8xf32>)
    %3 = clip(%1) {min = 0.0, max = 6.0} : tensor<1x3x8x8xf32>
    nn.relu(%2) : ()
    return %3
  }

  func @"pair"(%a: tensor<1x3x8x8xf32>) -> (tensor<1x3x8x8xf32>, tensor<1x3x8x8xf32>) {
    %"s t" = nn.relu(%a) : tensor<1x3x8x8xf32>
    return %"s t", %a
  }
}
"#;

#[test]
fn the_fuzz_seed_is_valid() {
    parse_module(VALID, "valid.tgc").unwrap();
}

/// Pieces of the format, so random sequences reach deep into the parser.
fn token_soup() -> impl Strategy<Value = String> {
    let pieces = vec![
        "module",
        "func",
        "return",
        "call",
        "attributes",
        "tensor",
        "<",
        ">",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "=",
        "->",
        "-",
        "%x",
        "%0",
        "@m",
        "@f",
        "\"s\"",
        "\"",
        "\\",
        "1",
        "-2",
        "1.5",
        "1e",
        "x",
        "f32",
        "1x3xf32",
        "add",
        "nn.relu",
        "clip",
        "inf",
        "nan",
        "true",
        "//",
        "\n",
        " ",
        "é",
    ];
    prop::collection::vec(prop::sample::select(pieces), 0..80).prop_map(|v| v.concat())
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Insert(usize, char),
    Replace(usize, char),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let ch = prop_oneof![
        prop::sample::select(vec![
            '{', '}', '(', ')', '<', '>', '"', '\\', '%', '@', ',', ':', '=', '-', 'x', '0', '\n',
            'é'
        ]),
        any::<char>(),
    ];
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), ch.clone()).prop_map(|(i, c)| Mutation::Insert(i, c)),
        (any::<usize>(), ch).prop_map(|(i, c)| Mutation::Replace(i, c)),
    ]
}

fn mutate(src: &str, mutations: &[Mutation]) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for m in mutations {
        let n = chars.len();
        match *m {
            Mutation::Delete(i) if n > 0 => {
                chars.remove(i % n);
            }
            Mutation::Insert(i, c) => chars.insert(i % (n + 1), c),
            Mutation::Replace(i, c) if n > 0 => chars[i % n] = c,
            _ => {}
        }
    }
    chars.into_iter().collect()
}

/// Parsing returns; an error is well formed (one line, position inside the input).
fn parse_without_panic(src: &str) -> Result<(), TestCaseError> {
    match parse_module(src, "fuzz.tgc") {
        Ok(m) => {
            // Whatever parses prints canonically.
            let text = print_module(&m);
            let again = parse_module(&text, "again.tgc")
                .map_err(|e| TestCaseError::fail(format!("reprint does not parse: {e}\n{text}")))?;
            prop_assert_eq!(print_module(&again), text);
        }
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(!shown.contains('\n'), "multi-line error: {:?}", shown);
            prop_assert!(e.line >= 1 && e.line <= src.lines().count().max(1) + 1);
            prop_assert!(e.col >= 1);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_bytes_do_not_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        parse_without_panic(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_strings_do_not_panic(s in any::<String>()) {
        parse_without_panic(&s)?;
    }

    #[test]
    fn token_soup_does_not_panic(s in token_soup()) {
        parse_without_panic(&s)?;
        parse_without_panic(&format!("module @m {{\n  func @f(%x: tensor<f32>) -> tensor<f32> {{\n{s}"))?;
    }

    #[test]
    fn mutated_modules_do_not_panic(mutations in prop::collection::vec(mutation(), 1..6)) {
        parse_without_panic(&mutate(VALID, &mutations))?;
    }
}
