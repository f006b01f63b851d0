// tgc's own dialect, as `tgc opt --emit mlir` writes it: read back into the same module
// (a fused function with its keys, a call, a multi-result split), and written again in a
// form mlir-opt parses and prints back.
// RUN: %tgc opt %s | FileCheck %s
// RUN: %tgc opt %s --emit mlir | %mlir-opt --allow-unregistered-dialect | FileCheck %s --check-prefix=MLIR

// CHECK: module @split_add attributes {source = "hand-written"}
// CHECK: func @main(%arg0: tensor<1x8x4x4xf32>) -> tensor<1x4x4x4xf32> attributes {num_input = 1}
// CHECK-NEXT: %[[P:.*]] = call @fused_split_add(%arg0) : tensor<1x4x4x4xf32>
// CHECK: func @fused_split_add(%arg0: tensor<1x8x4x4xf32>) -> tensor<1x4x4x4xf32> attributes {Primitive = true, tgc.exact_key = "tgc2:0123", tgc.seed_plan = {tier = "exact", trials = 0}}
// CHECK-NEXT: %[[A:.*]], %[[B:.*]] = split(%arg0) {indices_or_sections = 2, axis = 1} : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>)
// CHECK-NEXT: %[[S:.*]] = add(%[[A]], %[[B]]) : tensor<1x4x4x4xf32>

// MLIR: module @split_add attributes {tgc.source = "hand-written"}
// MLIR: call @fused_split_add
// MLIR: func.func @fused_split_add({{.*}}) -> tensor<1x4x4x4xf32> attributes {Primitive = true, tgc.exact_key = "tgc2:0123", tgc.seed_plan = {tier = "exact", trials = 0 : i64}}
// MLIR: %[[R:.*]]:2 = "tgc.split"(%arg0) {axis = 1 : i64, indices_or_sections = 2 : i64}
// MLIR: "tgc.add"(%[[R]]#0, %[[R]]#1)

module @split_add attributes {tgc.source = "hand-written"} {
  func.func @main(%x: tensor<1x8x4x4xf32>) -> (tensor<1x4x4x4xf32>) attributes {num_input = 1 : i64} {
    %0 = func.call @fused_split_add(%x) : (tensor<1x8x4x4xf32>) -> (tensor<1x4x4x4xf32>)
    func.return %0 : tensor<1x4x4x4xf32>
  }
  func.func @fused_split_add(%x: tensor<1x8x4x4xf32>) -> (tensor<1x4x4x4xf32>) attributes {Primitive = true, tgc.exact_key = "tgc2:0123", tgc.seed_plan = {tier = "exact", trials = 0 : i64}} {
    %p:2 = "tgc.split"(%x) {indices_or_sections = 2 : i64, axis = 1 : i64} : (tensor<1x8x4x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>)
    %s = "tgc.add"(%p#0, %p#1) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> (tensor<1x4x4x4xf32>)
    func.return %s : tensor<1x4x4x4xf32>
  }
}
