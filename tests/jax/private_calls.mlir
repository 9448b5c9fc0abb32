// A private function called twice with differently sharded arguments (as JAX lowers a nested
// jit of `tanh` used on two activations), and a second function called once. Shardy's pipeline
// gives each call site its own copy of the function, propagates through it, and makes copies
// with the same shardings one function again; the program partitions and verifies on 4 devices.
// STAGE: partition
// ROOT-SHAPE: f32[4,8]
// VERIFY
module @jit_calls attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=2]>
  func.func public @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg2: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
    %0 = call @act(%arg0) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %1 = call @act(%arg1) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %2 = stablehlo.multiply %0, %1 : tensor<8x16xf32>
    %3 = call @layer(%2, %arg2) : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
    return %3 : tensor<8x8xf32>
  }
  func.func private @act(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
  func.func private @layer(%arg0: tensor<8x16xf32>, %arg1: tensor<16x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
    %1 = stablehlo.abs %0 : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}
