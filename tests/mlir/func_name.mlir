// A function name MLIR allows but HLO does not (`@.main`, starting with '.') becomes an HLO name
// (`_.main`), so the module prints as HLO text that parses again (fuzz_parse found the printed
// text rejected: "expected a computation name").
// STAGE: parse
// ARGS: --emit hlo
module @m {
  func.func public @.main() -> tensor<f32> {
    %0 = stablehlo.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
}
