// `gspmd sdy-opt FILE -sdy-propagation-pipeline` prints pipeline_calls.expected (ctest
// sdy/pipeline_calls): every call site gets its own copy of @scale, the copies that end with the
// same shardings are one function again (@scale for "a", @scale_0 for "b", in MLIR's post-order
// naming with one module-wide counter), @twice's constraint becomes an sdy.reshard, and an
// unused private function is dropped.
sdy.mesh @mesh = <["a"=2, "b"=2]>

func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>})
    -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %0 = call @scale(%arg0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = call @scale(%arg1) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = call @twice(%0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %1, %2 : tensor<8x4xf32>, tensor<8x4xf32>
}

func.func private @scale(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

func.func private @twice(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = call @scale(%arg0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x4xf32>
  %2 = sdy.sharding_constraint %0 <@mesh, [{"b"}, {}]> : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}

func.func private @unused(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  return %arg0 : tensor<8x4xf32>
}
