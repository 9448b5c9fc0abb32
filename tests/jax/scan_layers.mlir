// A scanned layer loop (jax.lax.scan over stacked weights), as JAX lowers it: a
// `stablehlo.while` whose body slices layer i out of f32[3,16,16] with dynamic_slice. The
// activations are split over "data", the stacked weights' output dim over "model".
// STAGE: partition
// ARGS: --num-partitions 4 --propagate
// ROOT-SHAPE: f32[4,16]
// VERIFY
module @jit_scan attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=2]>
  func.func public @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<3x16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"model"}]>}) -> (tensor<8x16xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:3 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0, %iterArg_1 = %arg1) : tensor<i32>, tensor<8x16xf32>, tensor<3x16x16xf32>
    cond {
      %c_2 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare  LT, %iterArg, %c_2,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_2 = stablehlo.constant dense<0> : tensor<i32>
      %c_3 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.dynamic_slice %iterArg_1, %iterArg, %c_2, %c_2, sizes = [1, 16, 16] : (tensor<3x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x16x16xf32>
      %2 = stablehlo.reshape %1 : (tensor<1x16x16xf32>) -> tensor<16x16xf32>
      %3 = stablehlo.dot_general %iterArg_0, %2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %4 = stablehlo.tanh %3 : tensor<8x16xf32>
      %5 = stablehlo.add %iterArg_0, %4 : tensor<8x16xf32>
      %6 = stablehlo.add %iterArg, %c_3 : tensor<i32>
      stablehlo.return %6, %5, %iterArg_1 : tensor<i32>, tensor<8x16xf32>, tensor<3x16x16xf32>
    }
    return %0#1 : tensor<8x16xf32>
  }
}
