// StableHLO in its custom (pretty) form needs the dialect registered: tgc says to print the
// generic form instead.
// RUN: not %tgc tasks %s 2>&1 | FileCheck %s -DFILE=%s
// CHECK: error: [[FILE]]:8:10: Dialect `stablehlo' not found for custom op 'stablehlo.add' (tgc reads StableHLO in MLIR's generic form: print the module with print_generic_op_form=True)

module {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %a : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
