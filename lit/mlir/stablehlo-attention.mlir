// Attention scores as JAX lowers them: a dot_general with batch dimensions and the key's
// contracting dimension last (a transposed operand), a max-reduce for the softmax, and a
// max pool (reduce_window) in NHWC.
// RUN: %tgc import %s | FileCheck %s

// CHECK: %[[KT:.*]] = permute_dims(%arg1) {axes = [0, 2, 1]} : tensor<4x32x64xf32>
// CHECK-NEXT: %[[S:.*]] = matmul(%arg0, %[[KT]]) : tensor<4x64x64xf32>
// CHECK-NEXT: %[[M:.*]] = max(%[[S]]) {axis = [2], keepdims = false} : tensor<4x64xf32>
// CHECK-NEXT: %[[P:.*]] = nn.max_pool2d(%arg2) {pool_size = [3, 3], strides = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1], ceil_mode = false, layout = "NHWC"{{.*}}} : tensor<1x8x8x16xf32>
// CHECK-NEXT: return %[[M]], %[[P]]

"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4x64x32xf32>, tensor<4x64x32xf32>, tensor<1x16x16x16xf32>) -> (tensor<4x64xf32>, tensor<1x8x8x16xf32>), sym_name = "main"}> ({
  ^bb0(%q: tensor<4x64x32xf32>, %k: tensor<4x64x32xf32>, %x: tensor<1x16x16x16xf32>):
    %0 = "stablehlo.dot_general"(%q, %k) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>}> : (tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
    %1 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %2 = "stablehlo.reduce"(%0, %1) <{dimensions = array<i64: 2>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = "stablehlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%m) : (tensor<f32>) -> ()
    }) : (tensor<4x64x64xf32>, tensor<f32>) -> tensor<4x64xf32>
    %3 = "stablehlo.reduce_window"(%x, %1) <{padding = dense<[[0, 0], [1, 1], [1, 1], [0, 0]]> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = "stablehlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%m) : (tensor<f32>) -> ()
    }) : (tensor<1x16x16x16xf32>, tensor<f32>) -> tensor<1x8x8x16xf32>
    "func.return"(%2, %3) : (tensor<4x64xf32>, tensor<1x8x8x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()
