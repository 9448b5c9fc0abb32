// A constant used by a dot and by an elementwise op, under Shardy's propagation (the module
// declares sdy.mesh): Shardy's import gives each use its own copy (ConstantOrScalarSplitter),
// so the dot's copy takes the split the dot wants ({"b"} on its contracting rows: the dot sums
// partial products with one all-reduce) while the multiply's copy takes the operand's
// [{"a"}, {"b"}]. With one shared constant, its one sharding served neither: the program
// all-gathered the constant itself, the operand and the product (3 all-gathers).
// STAGE: partition
// ARGS: --num-partitions 4
// COLLECTIVES: all-gather=0 all-reduce=1 all-to-all=0 collective-permute=0 reduce-scatter=0
// ROOT-SHAPE: (f32[4,8], f32[4,4])
// VERIFY
module @jit_f attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func public @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) {
    %w = stablehlo.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0], [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0, 2.0], [5.0, 6.0, 7.0, 8.0, 9.0, 1.0, 2.0, 3.0], [6.0, 7.0, 8.0, 9.0, 1.0, 2.0, 3.0, 4.0], [7.0, 8.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0], [8.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]> : tensor<8x8xf32>
    %0 = stablehlo.dot_general %arg0, %w, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = stablehlo.multiply %arg0, %w : tensor<8x8xf32>
    return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}
