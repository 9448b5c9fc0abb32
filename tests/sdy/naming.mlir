// `gspmd sdy-opt FILE` prints naming.expected (ctest sdy/naming): MLIR's value names as
// Shardy's CHECK lines see them. Constants are `%c` (integers) and `%cst` (floats), then
// `%c_K` with K from one conflict counter; a while's arguments `%iterArg`, `%iterArg_K`; a
// region's values are numbered after all of its parent region's, and its block arguments
// after the function's, sibling regions alike; floats as `%.6e` when that reads back.
func.func @naming(%arg0: tensor<8x4xf32>, %arg1: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.constant dense<0> : tensor<i32>
  %1 = stablehlo.constant dense<4> : tensor<i32>
  %2 = stablehlo.add %arg0, %arg1 : tensor<8x4xf32>
  %3:2 = stablehlo.while(%iterArg = %2, %iterArg_0 = %0) : tensor<8x4xf32>, tensor<i32>
    cond {
    %c = stablehlo.constant dense<4> : tensor<i32>
    %9 = stablehlo.compare  LT, %iterArg_0, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %9 : tensor<i1>
  } do {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %9 = stablehlo.add %iterArg_0, %c : tensor<i32>
    %10 = stablehlo.multiply %iterArg, %iterArg : tensor<8x4xf32>
    stablehlo.return %10, %9 : tensor<8x4xf32>, tensor<i32>
  }
  %4 = stablehlo.constant dense<0.0> : tensor<f32>
  %5 = "stablehlo.reduce"(%3#0, %4) <{dimensions = array<i64: 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %11 = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %11 : tensor<f32>
  }) : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
  %6 = "stablehlo.sort"(%5) <{dimension = 0 : i64}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %12 = stablehlo.compare  GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %12 : tensor<i1>
  }) : (tensor<8xf32>) -> tensor<8xf32>
  %7 = stablehlo.broadcast_in_dim %6, dims = [0] : (tensor<8xf32>) -> tensor<8x4xf32>
  %8 = stablehlo.constant dense<[[0.1, 2.5, -3.0, 1.0e10]]> : tensor<1x4xf32>
  %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<8x4xf32>
  %10 = stablehlo.add %7, %9 : tensor<8x4xf32>
  return %10 : tensor<8x4xf32>
}
