// A call of a function the module does not define (MLIR's verifier catches it).
// RUN: not %tgc tasks %s 2>&1 | FileCheck %s -DFILE=%s
// CHECK: error: [[FILE]]:8:8: 'func.call' op 'relu' does not reference a valid function
// CHECK-NOT: panicked

"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<4xf32>):
  %0 = "func.call"(%a) <{callee = @relu}> : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()
