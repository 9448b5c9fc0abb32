// chlo.zeta and chlo.polygamma (f32, f64, f16 through f32) against known values:
// zeta(2, 1) = pi^2/6, zeta(3, 2) = zeta(3) - 1, zeta(1, q) = inf; polygamma(0, 1) = -gamma,
// polygamma(1, 1) = pi^2/6, polygamma(2, 1) = -2 zeta(3), polygamma(0.5, x) = NaN.
// STAGE: eval
// TOL: 1e-5
// OUT0: f64[3] 1.6449340668482264 0.2020569031595943 inf
module @jit_chlo_zeta {
  func.func public @main() -> tensor<3xf64> {
    %x = stablehlo.constant dense<[2.0, 3.0, 1.0]> : tensor<3xf64>
    %q = stablehlo.constant dense<[1.0, 2.0, 5.0]> : tensor<3xf64>
    %0 = chlo.zeta %x, %q : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>
    %x32 = stablehlo.convert %x : (tensor<3xf64>) -> tensor<3xf32>
    %q32 = stablehlo.convert %q : (tensor<3xf64>) -> tensor<3xf32>
    %1 = chlo.zeta %x32, %q32 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %e1 = stablehlo.constant dense<[1.6449340668, 0.2020569032, 0x7F800000]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_almost_eq(%1, %e1) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    %n = stablehlo.constant dense<[0.0, 1.0, 2.0, 0.5]> : tensor<4xf32>
    %y = stablehlo.constant dense<1.0> : tensor<4xf32>
    %2 = chlo.polygamma %n, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %e2 = stablehlo.constant dense<[-0.5772156649, 1.6449340668, -2.4041138063, 0x7FC00000]> : tensor<4xf32>
    stablehlo.custom_call @check.expect_almost_eq(%2, %e2) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
    %nh = stablehlo.convert %n : (tensor<4xf32>) -> tensor<4xf16>
    %yh = stablehlo.convert %y : (tensor<4xf32>) -> tensor<4xf16>
    %3 = "chlo.polygamma"(%nh, %yh) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
    %e3 = stablehlo.convert %e2 : (tensor<4xf32>) -> tensor<4xf16>
    stablehlo.custom_call @check.expect_almost_eq(%3, %e3) {has_side_effect = true} : (tensor<4xf16>, tensor<4xf16>) -> ()
    return %0 : tensor<3xf64>
  }
}
