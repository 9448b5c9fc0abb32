// chlo.ragged_dot with Shardy shardings (a mixture of experts' layer: the batch split over x, k
// over y): Shardy's rule for it (XLA's extension) propagates the batch to the rhs, the group
// sizes and the result; the ragged dim and the groups stay whole. Each device runs the
// ragged-dot of its shards and the partial sums over y are all-reduced.
// STAGE: partition
// ARGS: --num-partitions 4
// COLLECTIVES: all-gather=0 all-reduce=1 all-to-all=0 collective-permute=0 reduce-scatter=0
// VERIFY:
sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%lhs : tensor<4x8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {"y"}]>}, %rhs : tensor<3x4x6x5xf32>, %gs : tensor<4x3xi32>) -> tensor<4x8x5xf32> {
  %0 = "chlo.ragged_dot"(%lhs, %rhs, %gs) {
    ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [1], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2], lhs_ragged_dimensions = [1], rhs_group_dimensions = [0]>,
    precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]
  } : (tensor<4x8x6xf32>, tensor<3x4x6x5xf32>, tensor<4x3xi32>) -> tensor<4x8x5xf32>
  return %0 : tensor<4x8x5xf32>
}
