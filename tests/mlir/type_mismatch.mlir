// Operands whose types do not fit the op: the verifier's located error.
// STAGE: verify
// ERROR-HAS: FILE:8:10: error:
module {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<1.0> : tensor<2xf32>
    %1 = stablehlo.constant dense<1.0> : tensor<3xf32>
    %2 = stablehlo.add %0, %1 : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
    return %2 : tensor<2xf32>
  }
}
