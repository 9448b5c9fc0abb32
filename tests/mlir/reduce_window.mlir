// reduce_window in its generic form: window_dimensions, window_strides, padding (an Nx2 dense
// tensor), window_dilations and base_dilations map to HLO's window={size stride pad rhs_dilate
// lhs_dilate}. x = [[1, 2, 3, 4], [5, 6, 7, 8]].
// STAGE: eval
// OUT0: f32[2,3] 1 5 4 5 13 8
module @jit_reduce_window {
  func.func public @main() -> tensor<2x3xf32> {
    %x = stablehlo.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%x, %zero) <{padding = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x3xf32>
    %1 = "stablehlo.reduce_window"(%x, %zero) <{window_dimensions = array<i64: 1, 2>, window_dilations = array<i64: 1, 2>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x2xf32>
    %2 = stablehlo.constant dense<[[4.0, 6.0], [12.0, 14.0]]> : tensor<2x2xf32>
    stablehlo.custom_call @check.expect_eq(%1, %2) {has_side_effect = true} : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()
    %3 = "stablehlo.reduce_window"(%x, %zero) <{base_dilations = array<i64: 1, 2>, window_dimensions = array<i64: 1, 2>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x6xf32>
    %4 = stablehlo.constant dense<[[1.0, 2.0, 2.0, 3.0, 3.0, 4.0], [5.0, 6.0, 6.0, 7.0, 7.0, 8.0]]> : tensor<2x6xf32>
    stablehlo.custom_call @check.expect_eq(%3, %4) {has_side_effect = true} : (tensor<2x6xf32>, tensor<2x6xf32>) -> ()
    return %0 : tensor<2x3xf32>
  }
}
