// `gspmd sdy-opt FILE -sdy-basic-propagate` prints dynamic_dims.expected (ctest
// sdy/dynamic_dims): an unbounded dynamic dim prints as `?` with no encoding, as written (it
// printed `#stablehlo.bounds<?, ?>`, which says nothing); a bounded one keeps its bounds.
// Propagation skips the dynamic values and shards the static ones.
sdy.mesh @mesh = <["a"=2, "b"=2]>

func.func @main(%arg0: tensor<?x?xf32>, %arg1: tensor<?x4xf32, #stablehlo.bounds<8, ?>>,
                %arg2: tensor<8x16xf32>)
    -> (tensor<?x?xf32>, tensor<?x4xf32, #stablehlo.bounds<8, ?>>,
        tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) {
  %0 = stablehlo.negate %arg2 : tensor<8x16xf32>
  return %arg0, %arg1, %0 : tensor<?x?xf32>, tensor<?x4xf32, #stablehlo.bounds<8, ?>>, tensor<8x16xf32>
}
