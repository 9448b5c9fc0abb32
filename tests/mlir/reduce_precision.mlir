// reduce_precision's `format = eXmY` maps to HLO's exponent_bits=X mantissa_bits=Y. With two
// mantissa bits 1 + 2^-10 rounds to 1, 1.375 (a tie) to even 1.5, and 1.25 stays.
// STAGE: eval
// OUT0: f32[3] 1 1.5 1.25
module @jit_reduce_precision {
  func.func public @main() -> tensor<3xf32> {
    %x = stablehlo.constant dense<[1.0009765625, 1.375, 1.25]> : tensor<3xf32>
    %0 = stablehlo.reduce_precision %x, format = e8m2 : tensor<3xf32>
    %1 = stablehlo.constant dense<[1.0, 1.5, 1.25]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_eq(%0, %1) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    return %0 : tensor<3xf32>
  }
}
