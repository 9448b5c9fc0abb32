// stablehlo.rng's shape operand must say its result's dimensions: a located error.
// STAGE: parse
// ERROR: rng_shape_bad.mlir:9:10: error: stablehlo.rng's shape operand says 4 for dimension 1, its result type 3
module @jit_bad {
  func.func public @main() -> tensor<2x3xf32> {
    %a = stablehlo.constant dense<0.0> : tensor<f32>
    %b = stablehlo.constant dense<1.0> : tensor<f32>
    %s = stablehlo.constant dense<[2, 4]> : tensor<2xi64>
    %0 = stablehlo.rng %a, %b, %s, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<2xi64>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
