// Data parallel, as JAX (GSPMD-era, `jax_use_shardy_partitioner=False`) lowers it: the batch
// split over 4 devices with `mhlo.sharding` strings, the weights replicated, a loss reduced over
// everything. Per device the activations are f32[2,32]; the loss needs one all-reduce. No
// options: partition takes the device count from mhlo.num_partitions and propagates (as JAX
// does) because the input is StableHLO; without propagation the loss would be computed whole.
// STAGE: partition
// ROOT-SHAPE: (f32[2,32], f32[])
// COLLECTIVES: all-reduce=1
// VERIFY
module @jit_step attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x16xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{devices=[4,1]<=[4]}"}, %arg1: tensor<16x32xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}"}) -> (tensor<8x32xf32> {jax.result_info = "", mhlo.layout_mode = "default", mhlo.sharding = "{devices=[4,1]<=[4]}"}, tensor<f32> {jax.result_info = "", mhlo.sharding = "{replicated}"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    %1 = stablehlo.tanh %0 : tensor<8x32xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<f32>
    return %1, %2 : tensor<8x32xf32>, tensor<f32>
  }
}
