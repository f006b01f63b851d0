// A dynamic dimension: tgc needs static shapes.
// RUN: not %tgc import %s 2>&1 | FileCheck %s -DFILE=%s
// CHECK: error: [[FILE]]:5:1: 'func.func': argument 0: type tensor<?x4xf32> has a dynamic dimension; tgc needs static shapes (export with concrete input shapes)

"func.func"() <{function_type = (tensor<?x4xf32>) -> tensor<?x4xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<?x4xf32>):
  %0 = "stablehlo.exponential"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  "func.return"(%0) : (tensor<?x4xf32>) -> ()
}) : () -> ()
