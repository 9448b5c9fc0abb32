// Function arguments whose MLIR names are not HLO names (`%$`, `%0a`) become parameters with HLO
// names (`__`, `_0a`), so the module prints as HLO that reads back: fuzz_parse found `%$` printed
// as a parameter name the HLO reader rejects. As a fuzz seed this file also checks the fixed point.
// STAGE: eval
// INPUT __: f32[] 1.5
// INPUT _0a: f32[] 2
// OUT0: f32[] 3.5
module @arg_names {
  func.func public @main(%$: tensor<f32>, %0a: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.add %$, %0a : tensor<f32>
    return %0 : tensor<f32>
  }
}
