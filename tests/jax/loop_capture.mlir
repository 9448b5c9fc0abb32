// A fori_loop whose body closes over a sharded weight and a bias instead of carrying them, as
// JAX lowers `lax.fori_loop(0, 3, lambda i, x: jnp.tanh(x @ w) + b, x)`: the body uses %arg1
// and %arg2 from around the `stablehlo.while`. The reader carries them as extra loop state.
// Activations split over "data", the weight's output dim over "model"; the program takes its
// device count (mhlo.num_partitions) and propagation from the module.
// STAGE: partition
// ROOT-SHAPE: f32[4,16]
// VERIFY
module @jit_loop attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=2]>
  func.func public @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg2: tensor<16xf32>) -> (tensor<8x16xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<3> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_1 = %arg0) : tensor<i32>, tensor<8x16xf32>
    cond {
      %1 = stablehlo.compare  LT, %iterArg, %c_0,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_2 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.dot_general %iterArg_1, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %2 = stablehlo.tanh %1 : tensor<8x16xf32>
      %3 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
      %4 = stablehlo.add %2, %3 : tensor<8x16xf32>
      %5 = stablehlo.add %iterArg, %c_2 : tensor<i32>
      stablehlo.return %5, %4 : tensor<i32>, tensor<8x16xf32>
    }
    return %0#1 : tensor<8x16xf32>
  }
}
