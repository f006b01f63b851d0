// An op the frontend does not convert: one line naming the file, the op's line and column,
// and the op.
// RUN: not %tgc tasks %s 2>&1 | FileCheck %s -DFILE=%s
// CHECK: error: [[FILE]]:9:8: 'stablehlo.cholesky': unsupported op
// CHECK-NOT: panicked

"func.func"() <{function_type = (tensor<4x4xf32>) -> tensor<4x4xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<4x4xf32>):
  %0 = "stablehlo.cholesky"(%a) <{lower = true}> : (tensor<4x4xf32>) -> tensor<4x4xf32>
  "func.return"(%0) : (tensor<4x4xf32>) -> ()
}) : () -> ()
