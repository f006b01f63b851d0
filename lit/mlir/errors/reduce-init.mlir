// A reduction whose init value is not its reducer's identity is not a sum.
// RUN: not %tgc tasks %s 2>&1 | FileCheck %s -DFILE=%s
// CHECK: error: [[FILE]]:8:8: 'stablehlo.reduce': the init value Some(1.0) is not the identity of add

"func.func"() <{function_type = (tensor<4x4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<4x4xf32>):
  %c = "stablehlo.constant"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %0 = "stablehlo.reduce"(%a, %c) <{dimensions = array<i64: 1>}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = "stablehlo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%s) : (tensor<f32>) -> ()
  }) : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()
