// A chlo op with the wrong number of operands: one located error naming the op, not a crash.
// STAGE: parse
// ERROR: FILE:7:10: error: 'chlo.lgamma' takes 1 operand, found 2
module {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<1.0> : tensor<2xf32>
    %1 = chlo.lgamma %0, %0 : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}
