// A manual computation with no manual axes (manual_axes={}, as Shardy's tests and a shard_map
// over no axes write it): its edges are identities, in the partitioner and in the reference
// interpreter (both declined it before). The sharding inside reaches the operand through them.
// STAGE: partition
// ROOT-SHAPE: f32[16,8]
// VERIFY
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func public @main(%arg0: tensor<32x8xf32>) -> (tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{?}, {?}]>] out_shardings=[<@mesh, [{?}, {?}]>] manual_axes={} (%arg1: tensor<32x8xf32>) {
      %1 = stablehlo.multiply %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<32x8xf32>
      sdy.return %1 : tensor<32x8xf32>
    } : (tensor<32x8xf32>) -> tensor<32x8xf32>
    return %0 : tensor<32x8xf32>
  }
}
