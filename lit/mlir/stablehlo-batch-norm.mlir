// StableHLO's inference batch norm (NCHW, feature_index 1), decomposed as TVM's
// DecomposeOpsForInference and the ONNX frontend do; with the convolution before it, one task.
// RUN: %tgc import %s | FileCheck %s
// RUN: %tgc tasks %s | FileCheck %s --check-prefix=TASKS

// CHECK: %[[C:.*]] = nn.conv2d(%arg0, %arg1) {{.*}}data_layout = "NCHW", kernel_layout = "OIHW"{{.*}} : tensor<1x8x6x6xf32>
// CHECK-NEXT: %[[M:.*]] = expand_dims(%arg4) {axis = [0, 2, 3]} : tensor<1x8x1x1xf32>
// CHECK-NEXT: %[[V:.*]] = expand_dims(%arg5) {axis = [0, 2, 3]} : tensor<1x8x1x1xf32>
// CHECK-NEXT: %[[E:.*]] = constant() {value = [0.0010000000474974513], shape = [], dtype = "float32"} : tensor<f32>
// CHECK-NEXT: %[[VE:.*]] = add(%[[V]], %[[E]]) : tensor<1x8x1x1xf32>
// CHECK-NEXT: %[[S:.*]] = sqrt(%[[VE]]) : tensor<1x8x1x1xf32>
// CHECK-NEXT: %[[X:.*]] = subtract(%[[C]], %[[M]]) : tensor<1x8x6x6xf32>
// CHECK-NEXT: %[[N:.*]] = divide(%[[X]], %[[S]]) : tensor<1x8x6x6xf32>
// CHECK-NEXT: %[[G:.*]] = expand_dims(%arg2) {axis = [0, 2, 3]} : tensor<1x8x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = multiply(%[[N]], %[[G]]) : tensor<1x8x6x6xf32>
// CHECK-NEXT: %[[B:.*]] = expand_dims(%arg3) {axis = [0, 2, 3]} : tensor<1x8x1x1xf32>
// CHECK-NEXT: %[[R:.*]] = add(%[[Y]], %[[B]]) : tensor<1x8x6x6xf32>
// CHECK-NEXT: return %[[R]]

// TASKS: 1 distinct tasks, 1 occurrences
// TASKS: fused_conv2d_expand_dims_expand_dims_add_sqrt_subtract_divide

"func.func"() <{function_type = (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x6x6xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %scale: tensor<8xf32>, %offset: tensor<8xf32>, %mean: tensor<8xf32>, %var: tensor<8xf32>):
  %0 = "stablehlo.convolution"(%x, %w) <{batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, feature_group_count = 1 : i64}> : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %1 = "stablehlo.batch_norm_inference"(%0, %scale, %offset, %mean, %var) <{epsilon = 1.000000e-03 : f32, feature_index = 1 : i64}> : (tensor<1x8x6x6xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x6x6xf32>
  "func.return"(%1) : (tensor<1x8x6x6xf32>) -> ()
}) : () -> ()
