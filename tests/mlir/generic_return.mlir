// A region ended by the generic form of its terminator, `"stablehlo.return"(%0) : (...) -> ()`,
// as stablehlo-opt prints ops without a pretty form (Shardy's reduce_scatter test): the reader
// took the op name for a pretty return and stopped at `(`. Sums [1, 2, 3, 4] to 10.
// STAGE: eval
// OUT0: f32[] 10
func.func @main() -> tensor<f32> {
  %x = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce"(%x, %z) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  "func.return"(%0) : (tensor<f32>) -> ()
}
