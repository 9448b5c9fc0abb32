// `gspmd sdy-opt FILE -sdy-populate-op-sharding-rules` prints populate_rules.expected (ctest
// sdy/populate_rules): MLIR's form as Shardy's sdy_opt prints it (`module {` around bare
// functions, the functions' own names in the order written, `func.func private`, `return`,
// attributes in name order) with the factor rule of each op whose rule is settled (dot_general,
// transpose, reshapes, elementwise, and ragged_dot in its three modes as XLA's Shardy extension
// builds it: the ragged dim and the groups need replication, the group sizes' prefix follows
// the batch and the free or contracting dims before the ragged one); rules the input wrote are
// kept, as Shardy keeps them.
sdy.mesh @mesh = <["a"=2, "b"=2]>

func.func @main(%arg0: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {}]>}, %arg1: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %1 = call @helper(%0) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %1 : tensor<8x16xf32>
}

func.func private @helper(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %1 = stablehlo.reshape %0 : (tensor<16x8xf32>) -> tensor<128xf32>
  %2 = stablehlo.reshape %1 : (tensor<128xf32>) -> tensor<8x16xf32>
  %3 = stablehlo.add %2, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {?}]>]>} : tensor<8x16xf32>
  %4 = stablehlo.negate %3 : tensor<8x16xf32>
  %5 = stablehlo.custom_call @foo(%4) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=16} need_replication={j} blocked_propagation={i}, custom>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %6 = stablehlo.multiply %5, %5 {sdy.sharding_rule = #sdy.op_sharding_rule<([ij, k], [ij, k])->([ij, k]) {i=4, j=2, k=16}>} : tensor<8x16xf32>
  return %6 : tensor<8x16xf32>
}

func.func private @ragged(%l: tensor<2x8x6xf32>, %w: tensor<3x2x6x5xf32>, %g: tensor<2x3xi32>, %r: tensor<2x6x5xf32>, %g1: tensor<3xi32>) -> (tensor<2x8x5xf32>, tensor<3x2x8x5xf32>, tensor<2x8x5xf32>) {
  %0 = "chlo.ragged_dot"(%l, %w, %g) {ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [1], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2], lhs_ragged_dimensions = [1], rhs_group_dimensions = [0]>, precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]} : (tensor<2x8x6xf32>, tensor<3x2x6x5xf32>, tensor<2x3xi32>) -> tensor<2x8x5xf32>
  %1 = "chlo.ragged_dot"(%l, %r, %g) {ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [2], rhs_group_dimensions = []>, precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]} : (tensor<2x8x6xf32>, tensor<2x6x5xf32>, tensor<2x3xi32>) -> tensor<3x2x8x5xf32>
  %2 = "chlo.ragged_dot"(%l, %r, %g1) {ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [0], rhs_group_dimensions = []>, precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]} : (tensor<2x8x6xf32>, tensor<2x6x5xf32>, tensor<3xi32>) -> tensor<2x8x5xf32>
  return %0, %1, %2 : tensor<2x8x5xf32>, tensor<3x2x8x5xf32>, tensor<2x8x5xf32>
}
