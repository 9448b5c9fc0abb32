// select_and_scatter in its generic form: two regions (select, then scatter) become HLO's
// select= and scatter= computations, the window attributes window={}. Each 2x2 window of x
// picks its largest element (GE) and adds the source value there.
// STAGE: eval
// OUT0: f32[2,4] 0 10 0 0 0 0 20 0
module @jit_select_and_scatter {
  func.func public @main() -> tensor<2x4xf32> {
    %x = stablehlo.constant dense<[[1.0, 5.0, 3.0, 2.0], [4.0, 2.0, 8.0, 6.0]]> : tensor<2x4xf32>
    %src = stablehlo.constant dense<[[10.0, 20.0]]> : tensor<1x2xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = "stablehlo.select_and_scatter"(%x, %src, %zero) <{window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare  GE, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }, {
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x4xf32>, tensor<1x2xf32>, tensor<f32>) -> tensor<2x4xf32>
    %1 = stablehlo.constant dense<[[0.0, 10.0, 0.0, 0.0], [0.0, 0.0, 20.0, 0.0]]> : tensor<2x4xf32>
    stablehlo.custom_call @check.expect_eq(%0, %1) {has_side_effect = true} : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
    return %0 : tensor<2x4xf32>
  }
}
