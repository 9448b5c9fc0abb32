// `gspmd sdy-opt FILE -sdy-propagation-pipeline` prints split_constants.expected (ctest
// sdy/split_constants): Shardy's constant splitting before propagation. Each use of a constant
// expression (a constant, an iota, and broadcasts, reshapes, slices and elementwise ops of
// them) gets a copy of it, placed before the original in the order the uses come, so that the
// dot's operands and the returned value are sharded apart; scalars stay shared; a broadcast
// of a scalar argument is copied per use too; every constant becomes sdy.constant.
sdy.mesh @mesh = <["a"=2, "b"=2]>

func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                %arg1: tensor<f32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %c = stablehlo.constant dense<2.000000e+00> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %i = stablehlo.iota dim = 0 : tensor<8x8xf32>
  %e = stablehlo.add %b, %i : tensor<8x8xf32>
  %d = stablehlo.dot_general %e, %e, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %x = stablehlo.multiply %arg0, %s : tensor<8x8xf32>
  %y = stablehlo.add %d, %s : tensor<8x8xf32>
  return %x, %y, %e : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
