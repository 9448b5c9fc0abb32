// A module name that starts with a digit (MLIR allows it, HLO does not) gets a '_' in front,
// so the module prints as HLO text that parses again (fuzz_parse found `0_inter.forms-2`).
// STAGE: parse
// ARGS: --emit hlo
module @0$inter.forms-2 {
  func.func public @main() -> tensor<f32> {
    %0 = stablehlo.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
}
