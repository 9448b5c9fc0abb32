// chlo special functions (pretty form) against well-known values: lgamma, digamma, erf, erfc,
// erf_inv, bessel_i1e in f32, f16 (computed in f32) and f64 (erf_inv's three ranges).
// STAGE: eval
// TOL: 1e-5
// OUT0: f32[3] 0.572364926 1.26551211 0.693147182
module @jit_chlo_special {
  func.func public @main() -> tensor<3xf32> {
    %x = stablehlo.constant dense<[0.5, -0.5, 3.0]> : tensor<3xf32>
    %0 = chlo.lgamma %x : tensor<3xf32> -> tensor<3xf32>
    %e0 = stablehlo.constant dense<[0.5723649429, 1.2655121235, 0.6931471806]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_almost_eq(%0, %e0) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    %h = stablehlo.constant dense<[0.5, -0.5, 3.0]> : tensor<3xf16>
    %1 = chlo.lgamma %h : tensor<3xf16> -> tensor<3xf16>
    %e1 = stablehlo.constant dense<[0.5723649429, 1.2655121235, 0.6931471806]> : tensor<3xf16>
    stablehlo.custom_call @check.expect_almost_eq(%1, %e1) {has_side_effect = true} : (tensor<3xf16>, tensor<3xf16>) -> ()
    %d = stablehlo.constant dense<[1.0, 0.5, -1.0]> : tensor<3xf64>
    %2 = chlo.digamma %d : tensor<3xf64> -> tensor<3xf64>
    %e2 = stablehlo.constant dense<[-0.5772156649, -1.9635100260, 0x7FF8000000000000]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%2, %e2) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %r = stablehlo.constant dense<[1.0, 0.5, -2.0]> : tensor<3xf32>
    %3 = chlo.erf %r : tensor<3xf32> -> tensor<3xf32>
    %e3 = stablehlo.constant dense<[0.8427007929, 0.5204998778, -0.9953222650]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_almost_eq(%3, %e3) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    %r64 = stablehlo.constant dense<[1.0, 0.5, -2.0]> : tensor<3xf64>
    %4 = chlo.erf %r64 : tensor<3xf64> -> tensor<3xf64>
    %e4 = stablehlo.constant dense<[0.8427007929, 0.5204998778, -0.9953222650]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%4, %e4) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %5 = chlo.erfc %r64 : tensor<3xf64> -> tensor<3xf64>
    %e5 = stablehlo.constant dense<[0.1572992071, 0.4795001222, 1.9953222650]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%5, %e5) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %6 = chlo.erfc %r : tensor<3xf32> -> tensor<3xf32>
    %e6 = stablehlo.constant dense<[0.1572992071, 0.4795001222, 1.9953222650]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_almost_eq(%6, %e6) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    %p = stablehlo.constant dense<[0.5, -0.9, 1.0]> : tensor<3xf32>
    %7 = chlo.erf_inv %p : tensor<3xf32> -> tensor<3xf32>
    %e7 = stablehlo.constant dense<[0.4769362762, -1.1630871537, 0x7F800000]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_almost_eq(%7, %e7) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    %p64 = stablehlo.constant dense<[0.5, -0.9, 0.999999, 0.999999999999]> : tensor<4xf64>
    %10 = chlo.erf_inv %p64 : tensor<4xf64> -> tensor<4xf64>
    %e10 = stablehlo.constant dense<[0.4769362762, -1.1630871537, 3.4589107373, 5.0420264962]> : tensor<4xf64>
    stablehlo.custom_call @check.expect_almost_eq(%10, %e10) {has_side_effect = true} : (tensor<4xf64>, tensor<4xf64>) -> ()
    %b = stablehlo.constant dense<[1.0, -1.0, 10.0]> : tensor<3xf64>
    %8 = chlo.bessel_i1e %b : tensor<3xf64> -> tensor<3xf64>
    %e8 = stablehlo.constant dense<[0.2079104153, -0.2079104153, 0.1212626814]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%8, %e8) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %b32 = stablehlo.convert %b : (tensor<3xf64>) -> tensor<3xf32>
    %9 = chlo.bessel_i1e %b32 : tensor<3xf32> -> tensor<3xf32>
    %e9 = stablehlo.convert %e8 : (tensor<3xf64>) -> tensor<3xf32>
    stablehlo.custom_call @check.expect_almost_eq(%9, %e9) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    return %0 : tensor<3xf32>
  }
}
