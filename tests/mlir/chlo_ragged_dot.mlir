// chlo.ragged_dot, as JAX's jax.lax.ragged_dot writes it (generic form), read as XLA's
// ragged-dot: a ragged non-contracting dim (rows past the groups' end are zeros) and a ragged
// contracting dim (a leading group dim; the groups' end past k is clamped). Values from an
// independent Python model (tests/interp/ragged_dot.hlo's first and fourth cases).
// STAGE: eval
// OUT0: f32[5,4] -13 -23 27 3 -11 -41 32 -5 -8 -79 -127 43 32 -58 -70 -2 0 0 0 0
// OUT1: f32[3,3,2] 33 10 -54 -16 25 8 -2 24 -69 63 29 -39 42 14 36 12 12 4
func.func @main() -> (tensor<5x4xf32>, tensor<3x3x2xf32>) {
  %al = stablehlo.constant dense<[[1.0, -5.0], [3.0, -8.0], [-7.0, 8.0], [-6.0, 2.0], [9.0, -8.0]]> : tensor<5x2xf32>
  %ar = stablehlo.constant dense<[[[7.0, -3.0, -8.0, -7.0], [4.0, 4.0, -7.0, -2.0]], [[-7.0, 8.0, 4.0, -8.0], [9.0, -6.0, -2.0, 9.0]], [[-8.0, 9.0, 9.0, 3.0], [-8.0, -2.0, -8.0, 8.0]]]> : tensor<3x2x4xf32>
  %ag = stablehlo.constant dense<[2, 0, 2]> : tensor<3xi32>
  %0 = "chlo.ragged_dot"(%al, %ar, %ag) {ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>, precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]} : (tensor<5x2xf32>, tensor<3x2x4xf32>, tensor<3xi32>) -> tensor<5x4xf32>
  %dl = stablehlo.constant dense<[[-3.0, -2.0, 3.0, -2.0, -3.0, 7.0], [6.0, 2.0, -9.0, -9.0, -1.0, 6.0], [-1.0, -3.0, 2.0, 5.0, 2.0, 2.0]]> : tensor<3x6xf32>
  %dr = stablehlo.constant dense<[[-7.0, -2.0], [-6.0, -2.0], [6.0, -3.0], [1.0, -3.0], [6.0, -9.0], [6.0, 2.0]]> : tensor<6x2xf32>
  %dg = stablehlo.constant dense<[2, 3, 4]> : tensor<3xi64>
  %1 = "chlo.ragged_dot"(%dl, %dr, %dg) {ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0], lhs_ragged_dimensions = [1], rhs_group_dimensions = []>, precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]} : (tensor<3x6xf32>, tensor<6x2xf32>, tensor<3xi64>) -> tensor<3x3x2xf32>
  return %0, %1 : tensor<5x4xf32>, tensor<3x3x2xf32>
}
