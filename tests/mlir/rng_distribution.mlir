// stablehlo.rng %a, %b, %shape, distribution = UNIFORM|NORMAL reads as HLO's rng(a, b),
// distribution=rng_uniform|rng_normal (it kept the shape as a third operand: "rng takes 2
// operands, but 3 were given"). Uniform in [2, 2) and normal of mean 5 and deviation 0: every
// value is known.
// STAGE: eval
// OUT0: f32[2,3] 2 2 2 2 2 2
// OUT1: f32[2] 5 5
module @jit_rng {
  func.func public @main() -> (tensor<2x3xf32>, tensor<2xf32>) {
    %a = stablehlo.constant dense<2.0> : tensor<f32>
    %s = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
    %0 = stablehlo.rng %a, %a, %s, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<2xi64>) -> tensor<2x3xf32>
    %m = stablehlo.constant dense<5.0> : tensor<f32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %t = stablehlo.constant dense<2> : tensor<1xi64>
    %1 = stablehlo.rng %m, %z, %t, distribution = NORMAL : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<2xf32>
    return %0, %1 : tensor<2x3xf32>, tensor<2xf32>
  }
}
