// A module name MLIR allows but HLO does not (`$`) becomes an HLO name, so the module prints as
// HLO text that parses again (fuzz_parse found the printed text rejected).
// STAGE: parse
// ARGS: --emit hlo
module @p$inter.forms-1 {
  func.func public @main() -> tensor<f32> {
    %0 = stablehlo.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
}
