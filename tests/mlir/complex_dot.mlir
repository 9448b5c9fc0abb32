// A complex dot sums whole complex products, k ascending, in the result type, as the StableHLO
// reference and XLA's CPU backend do. Row (4096 + 4096i, 1) by column (4096 + 4096i, 1): the
// products are (0 + 2^25 i) and 1, so the result is 1 + 2^25 i. A kernel that sums the
// real-by-real and imaginary-by-imaginary products apart (2^24 + 1 rounds to 2^24 in f32)
// gives 0 + 2^25 i. JAX's dot_general tests of int and bf16 by complex64 meet this.
// STAGE: eval
// OUT0: c64[4,6] 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j 1+33554432j
module @jit_complex_dot {
  func.func public @main() -> tensor<4x6xcomplex<f32>> {
    %a = stablehlo.constant dense<[[(4096.0, 4096.0), (1.0, 0.0)], [(4096.0, 4096.0), (1.0, 0.0)], [(4096.0, 4096.0), (1.0, 0.0)], [(4096.0, 4096.0), (1.0, 0.0)]]> : tensor<4x2xcomplex<f32>>
    %b = stablehlo.constant dense<[[(4096.0, 4096.0), (4096.0, 4096.0), (4096.0, 4096.0), (4096.0, 4096.0), (4096.0, 4096.0), (4096.0, 4096.0)], [(1.0, 0.0), (1.0, 0.0), (1.0, 0.0), (1.0, 0.0), (1.0, 0.0), (1.0, 0.0)]]> : tensor<2x6xcomplex<f32>>
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x2xcomplex<f32>>, tensor<2x6xcomplex<f32>>) -> tensor<4x6xcomplex<f32>>
    %e = stablehlo.constant dense<(1.0, 33554432.0)> : tensor<4x6xcomplex<f32>>
    stablehlo.custom_call @check.expect_eq(%0, %e) {has_side_effect = true} : (tensor<4x6xcomplex<f32>>, tensor<4x6xcomplex<f32>>) -> ()
    return %0 : tensor<4x6xcomplex<f32>>
  }
}
