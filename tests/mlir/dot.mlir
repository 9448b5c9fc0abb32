// stablehlo.dot (vectors and matrices: the lhs's last dim against the rhs's first), in its
// pretty and generic forms; the reader rejected it as an unknown op (Shardy's
// op_sharding_rule_registry tests use it). [1,2]·[[1,2,3],[4,5,6]] = [9,12,15];
// [[1,2],[3,4]]·[1,1] = [3,7]; [1,2]·[3,4] = 11.
// STAGE: eval
// OUT0: f32[3] 9 12 15
// OUT1: f32[2] 3 7
// OUT2: f32[] 11
func.func @main() -> (tensor<3xf32>, tensor<2xf32>, tensor<f32>) {
  %v = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %w = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %m = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %o = stablehlo.constant dense<1.0> : tensor<2xf32>
  %u = stablehlo.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %0 = stablehlo.dot %v, %w : (tensor<2xf32>, tensor<2x3xf32>) -> tensor<3xf32>
  %1 = "stablehlo.dot"(%m, %o) : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = stablehlo.dot %v, %u, precision = [DEFAULT, DEFAULT] : (tensor<2xf32>, tensor<2xf32>) -> tensor<f32>
  return %0, %1, %2 : tensor<3xf32>, tensor<2xf32>, tensor<f32>
}
