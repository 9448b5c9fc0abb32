// Ops in their pretty forms, a function call, a reduce (`applies` and region forms), a
// size-1 broadcast_in_dim, and a generic-form op.
// STAGE: eval
// OUT0: f32[2] 6 15
module @jit_ops {
  func.func public @main() -> tensor<2xf32> {
    %0 = call @inputs() : () -> tensor<2x3xf32>
    %1 = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%0 init: %1) applies stablehlo.add across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    %3 = stablehlo.constant dense<[6.0, 15.0]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%2, %3) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    %4 = stablehlo.reduce(%0 init: %1) across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
     reducer(%a: tensor<f32>, %b: tensor<f32>)  {
      %m = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }
    %5 = stablehlo.constant dense<[4.0, 5.0, 6.0]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_eq(%4, %5) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    %6 = stablehlo.slice %0 [0:2, 1:3:2] : (tensor<2x3xf32>) -> tensor<2x1xf32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x3xf32>
    %8 = stablehlo.transpose %7, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %9 = stablehlo.dot_general %0, %8, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
    %10 = stablehlo.constant dense<[[12.0, 30.0], [30.0, 75.0]]> : tensor<2x2xf32>
    stablehlo.custom_call @check.expect_close(%9, %10) {has_side_effect = true} : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()
    %11 = stablehlo.iota dim = 0 : tensor<3xi32>
    %12 = stablehlo.constant dense<1> : tensor<3xi32>
    %13 = stablehlo.compare  GE, %11, %12,  SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %14 = "stablehlo.select"(%13, %11, %12) : (tensor<3xi1>, tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %15 = stablehlo.concatenate %14, %12, dim = 0 : (tensor<3xi32>, tensor<3xi32>) -> tensor<6xi32>
    %16 = stablehlo.constant dense<[1, 1, 2, 1, 1, 1]> : tensor<6xi32>
    stablehlo.custom_call @check.expect_eq(%15, %16) {has_side_effect = true} : (tensor<6xi32>, tensor<6xi32>) -> ()
    return %2 : tensor<2xf32>
  }
  func.func private @inputs() -> (tensor<2x3xf32> {mhlo.layout_mode = "default"}) {
    %cst = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
    return %cst : tensor<2x3xf32>
  }
}
