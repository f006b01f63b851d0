// A convolution with a bias and a ReLU as JAX lowers them (generic StableHLO): the bias
// broadcast is implicit again, maximum(x, 0) is nn.relu, and the three ops are one task.
// RUN: %tgc import %s | FileCheck %s
// RUN: %tgc tasks %s | FileCheck %s --check-prefix=TASKS

// CHECK: func @main(%arg0: tensor<3x3x16x32xf32>, %arg1: tensor<32xf32>, %arg2: tensor<1x32x32x16xf32>) -> tensor<1x32x32x32xf32> attributes {num_input = 3}
// CHECK-NEXT: %[[C:.*]] = nn.conv2d(%arg2, %arg0) {strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1, data_layout = "NHWC", kernel_layout = "HWIO"} : tensor<1x32x32x32xf32>
// CHECK-NEXT: %[[A:.*]] = add(%[[C]], %arg1) : tensor<1x32x32x32xf32>
// CHECK-NEXT: %[[R:.*]] = nn.relu(%[[A]]) : tensor<1x32x32x32xf32>
// CHECK-NEXT: return %[[R]]

// TASKS: 1 distinct tasks, 1 occurrences
// TASKS: fused_conv2d_add_relu

"builtin.module"() <{sym_name = "jit_f"}> ({
  "func.func"() <{function_type = (tensor<3x3x16x32xf32>, tensor<32xf32>, tensor<1x32x32x16xf32>) -> tensor<1x32x32x32xf32>, sym_name = "main"}> ({
  ^bb0(%w: tensor<3x3x16x32xf32>, %b: tensor<32xf32>, %x: tensor<1x32x32x16xf32>):
    %0 = "stablehlo.convolution"(%x, %w) <{batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, feature_group_count = 1 : i64, lhs_dilation = array<i64: 1, 1>, padding = dense<1> : tensor<2x2xi64>, rhs_dilation = array<i64: 1, 1>, window_strides = array<i64: 1, 1>}> : (tensor<1x32x32x16xf32>, tensor<3x3x16x32xf32>) -> tensor<1x32x32x32xf32>
    %1 = "stablehlo.reshape"(%b) : (tensor<32xf32>) -> tensor<1x1x1x32xf32>
    %2 = "stablehlo.broadcast_in_dim"(%1) <{broadcast_dimensions = array<i64: 0, 1, 2, 3>}> : (tensor<1x1x1x32xf32>) -> tensor<1x32x32x32xf32>
    %3 = "stablehlo.add"(%0, %2) : (tensor<1x32x32x32xf32>, tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
    %4 = "func.call"(%3) <{callee = @relu}> : (tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
    "func.return"(%4) : (tensor<1x32x32x32xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>, sym_name = "relu", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<1x32x32x32xf32>):
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x32x32x32xf32>
    %2 = "stablehlo.maximum"(%arg0, %1) : (tensor<1x32x32x32xf32>, tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
    "func.return"(%2) : (tensor<1x32x32x32xf32>) -> ()
  }) : () -> ()
}) : () -> ()
