// FSDP x tensor parallel, as JAX with Shardy lowers it: a 4x2 mesh declared with `sdy.mesh`,
// every argument and the result with `#sdy.sharding`, a `sdy.sharding_constraint` on the hidden
// activations. The weights are split over both axes (FSDP on "data", Megatron on "model").
// STAGE: partition
// ARGS: --num-partitions 8 --propagate
// ROOT-SHAPE: f32[4,32]
// VERIFY
module @jit_step attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=4, "model"=2]>
  func.func public @main(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}, %arg2: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {"data"}]>}) -> (tensor<16x32xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"data"}, {"model"}]> : tensor<16x64xf32>
    %2 = stablehlo.tanh %1 : tensor<16x64xf32>
    %3 = stablehlo.dot_general %2, %arg2, contracting_dims = [1] x [0] : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
    return %3 : tensor<16x32xf32>
  }
}
