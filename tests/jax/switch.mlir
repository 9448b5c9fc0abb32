// lax.switch and lax.cond as JAX lowers them: `stablehlo.case` and `stablehlo.if` whose
// branches use the batch-split activations from around them. Propagation carries the split
// through the branches; no branch computes whole.
// STAGE: partition
// ARGS: --num-partitions 2 --propagate
// ROOT-SHAPE: (f32[4,4], f32[4,4])
// VERIFY
module @jit_f attributes {mhlo.num_partitions = 2 : i32} {
  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}, %arg2: tensor<i1>) -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}, tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) {
    %c = stablehlo.constant dense<2.0> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %1 = "stablehlo.case"(%arg0) ({
      %3 = stablehlo.sine %arg1 : tensor<8x4xf32>
      stablehlo.return %3 : tensor<8x4xf32>
    }, {
      %3 = stablehlo.multiply %arg1, %0 : tensor<8x4xf32>
      stablehlo.return %3 : tensor<8x4xf32>
    }, {
      stablehlo.return %0 : tensor<8x4xf32>
    }) : (tensor<i32>) -> tensor<8x4xf32>
    %2 = "stablehlo.if"(%arg2) ({
      %3 = stablehlo.negate %1 : tensor<8x4xf32>
      stablehlo.return %3 : tensor<8x4xf32>
    }, {
      stablehlo.return %1 : tensor<8x4xf32>
    }) : (tensor<i1>) -> tensor<8x4xf32>
    return %1, %2 : tensor<8x4xf32>, tensor<8x4xf32>
  }
}
