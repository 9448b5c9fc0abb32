// shard_map, as JAX with Shardy lowers it: `sdy.manual_computation` over the whole mesh, with a
// psum (`stablehlo.all_reduce` over the 4 devices) written inside the body. The region becomes
// Sharding + SPMDFullToShardShape, a call of the body (every instruction in it manual), then
// Sharding + SPMDShardToFullShape; partitioning adds no collective of its own.
// STAGE: partition
// ARGS: --num-partitions 4
// ROOT-SHAPE: f32[2,16]
// COLLECTIVES: all-reduce=1
// VERIFY
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x16xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<2x16xf32>) {
      %1 = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %3 = stablehlo.add %arg2, %arg3 : tensor<f32>
        stablehlo.return %3 : tensor<f32>
      }) : (tensor<2x16xf32>) -> tensor<2x16xf32>
      %2 = stablehlo.multiply %1, %arg1 : tensor<2x16xf32>
      sdy.return %2 : tensor<2x16xf32>
    } : (tensor<8x16xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}
