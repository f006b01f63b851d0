//! Constants in the keys: a lifted constant counts by dtype and shape, a constant the lowering
//! writes into the TIR (a rank-0 operand of a binary elementwise op) by its value too. The
//! live check that equal keys and equal TVM workloads coincide is in tests/constants.rs.

use tgc_canonicalize::{Level, TaskKeys};
use tgc_ir::text::parse_module;
use tgc_ir::Function;

/// A conv block of one task: bias and a per-layer affine as constants, then a rank-0 scale
/// that goes through `op` (a binary op inlines it; `where` lifts it).
fn block(bias: f64, scale: f64, shift: f64, layer: f64, op: &str) -> Function {
    let tail = match op {
        "where" => "%mask = greater(%h, %zero) : tensor<1x4x8x8xi1>\n\
                    %out = where(%mask, %h, %l) : tensor<1x4x8x8xf32>"
            .to_string(),
        _ => format!("%out = {op}(%h, %l) : tensor<1x4x8x8xf32>"),
    };
    let text = format!(
        r#"module @m {{
  func @t(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32> {{
    %b = constant() {{value = [{bias}, 0.5, -0.25, 1.0], shape = [1, 4, 1, 1], dtype = "float32"}} : tensor<1x4x1x1xf32>
    %s = constant() {{value = [{scale}], shape = [1], dtype = "float32"}} : tensor<1xf32>
    %t = constant() {{value = [{shift}], shape = [1], dtype = "float32"}} : tensor<1xf32>
    %l = constant() {{value = [{layer}], shape = [], dtype = "float32"}} : tensor<f32>
    %zero = constant() {{value = [0.0], shape = [], dtype = "float32"}} : tensor<f32>
    %c = nn.conv2d(%x, %w) {{padding = [1, 1, 1, 1]}} : tensor<1x4x8x8xf32>
    %y = add(%c, %b) : tensor<1x4x8x8xf32>
    %z = multiply(%y, %s) : tensor<1x4x8x8xf32>
    %h = add(%z, %t) : tensor<1x4x8x8xf32>
    {tail}
    return %out
  }}
}}"#
    );
    let m = parse_module(&text, "block.tgc").expect("test IR parses");
    m.function("t").expect("@t").clone()
}

#[test]
fn lifted_constants_count_by_dtype_and_shape_only() {
    let a = TaskKeys::of(&block(0.1, 1.2, -0.3, 0.5, "multiply"));
    let b = TaskKeys::of(&block(-0.7, 0.8, 0.4, 0.5, "multiply"));
    assert_eq!(a, b, "bias, scale and shift are lifted: one workload");
}

#[test]
fn constants_written_into_the_tir_keep_their_values_in_the_exact_key() {
    let a = TaskKeys::of(&block(0.1, 1.2, -0.3, 0.5, "multiply"));
    let b = TaskKeys::of(&block(0.1, 1.2, -0.3, 0.25, "multiply"));
    assert_ne!(
        a.exact, b.exact,
        "the rank-0 scale is an immediate of the TIR"
    );
    assert_eq!(a.structural, b.structural, "the loop nest is the same");
    assert_eq!(a.family, b.family);
}

#[test]
fn a_rank_0_constant_that_no_binary_op_reads_is_lifted() {
    let a = TaskKeys::of(&block(0.1, 1.2, -0.3, 0.5, "where"));
    let b = TaskKeys::of(&block(0.1, 1.2, -0.3, 0.25, "where"));
    assert_eq!(a.exact, b.exact, "where takes its operands from buffers");
}

#[test]
fn an_immediate_and_a_lifted_constant_are_different_workloads() {
    // The same scalar operand as a constant (an immediate) and as a parameter (a buffer the
    // PrimFunc reads): different signatures, so even the structural keys differ.
    let with_constant = block(0.1, 1.2, -0.3, 0.5, "multiply");
    let text = tgc_ir::text::print_function(&with_constant)
        .replace(
            "%l = constant() {value = [0.5], shape = [], dtype = \"float32\"} : tensor<f32>\n",
            "",
        )
        .replace(
            "%w: tensor<4x4x3x3xf32>)",
            "%w: tensor<4x4x3x3xf32>, %l: tensor<f32>)",
        );
    let m = parse_module(&format!("module @m {{\n{text}\n}}"), "param.tgc").expect("parses");
    let with_param = m.function("t").expect("@t");
    let (a, b) = (TaskKeys::of(&with_constant), TaskKeys::of(with_param));
    assert_ne!(a.exact, b.exact);
    assert_ne!(a.structural, b.structural);
    assert_eq!(a.get(Level::Family), b.get(Level::Family));
}
