// stablehlo.set_dimension_size / get_dimension_size (pretty form, `dim = D`): read as HLO's
// set-dimension-size / get-dimension-size and printed back the same (they had no StableHLO form
// in the printer). The first 3 of 5 elements are valid; the sum sees those.
// STAGE: eval
// INPUT arg0: f32[5] 1 2 3 4 5
// OUT0: s32[] 3
// OUT1: f32[] 6
module @jit_dynamic {
  func.func public @main(%arg0: tensor<5xf32>) -> (tensor<i32>, tensor<f32>) {
    %c = stablehlo.constant dense<3> : tensor<i32>
    %0 = stablehlo.set_dimension_size %arg0, %c, dim = 0 : (tensor<5xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<5>>
    %1 = stablehlo.get_dimension_size %0, dim = 0 : (tensor<?xf32, #stablehlo.bounds<5>>) -> tensor<i32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<?xf32, #stablehlo.bounds<5>>, tensor<f32>) -> tensor<f32>
    return %1, %2 : tensor<i32>, tensor<f32>
  }
}
