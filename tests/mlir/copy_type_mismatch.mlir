// A copy whose type differs from its operand's (a module the verifier rejects) cannot be printed
// as StableHLO, where a copy is its operand: one located error instead of text that reads back
// as another module (fuzz_parse found printing not a fixed point).
// STAGE: parse
// ERROR-HAS: 'copy' whose type differs from its operand's cannot be printed
module @m {
  func.func public @main(%arg0: tensor<6x4xf32>) -> tensor<3x4xf32> {
    %0 = stablehlo.copy %arg0 : (tensor<6x4xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }
}
