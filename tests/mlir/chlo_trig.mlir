// chlo inverse trigonometric and hyperbolic functions, real (f32, f64, bf16) and complex, plus
// tan, square, conj and the is_inf family, against well-known values.
// STAGE: eval
// TOL: 1e-5
// OUT0: f32[3] 0.523598790 1.04719758 0.785398185
module @jit_chlo_trig {
  func.func public @main() -> tensor<3xf32> {
    %h = stablehlo.constant dense<0.5> : tensor<f32>
    %a0 = chlo.asin %h : tensor<f32> -> tensor<f32>
    %a1 = chlo.acos %h : tensor<f32> -> tensor<f32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %a2 = chlo.atan %one : tensor<f32> -> tensor<f32>
    %r0 = stablehlo.reshape %a0 : (tensor<f32>) -> tensor<1xf32>
    %r1 = stablehlo.reshape %a1 : (tensor<f32>) -> tensor<1xf32>
    %r2 = stablehlo.reshape %a2 : (tensor<f32>) -> tensor<1xf32>
    %res = stablehlo.concatenate %r0, %r1, %r2, dim = 0 : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3xf32>
    %x = stablehlo.constant dense<[0.5, 1.0, 2.0]> : tensor<3xf64>
    %0 = chlo.atanh %x : tensor<3xf64> -> tensor<3xf64>
    %e0 = stablehlo.constant dense<[0.5493061443, 0x7FF0000000000000, 0x7FF8000000000000]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%0, %e0) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %1 = chlo.asinh %x : tensor<3xf64> -> tensor<3xf64>
    %e1 = stablehlo.constant dense<[0.4812118251, 0.8813735870, 1.4436354752]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%1, %e1) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %2 = chlo.acosh %x : tensor<3xf64> -> tensor<3xf64>
    %e2 = stablehlo.constant dense<[0x7FF8000000000000, 0.0, 1.3169578969]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%2, %e2) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %3 = chlo.sinh %x : tensor<3xf64> -> tensor<3xf64>
    %e3 = stablehlo.constant dense<[0.5210953055, 1.1752011936, 3.6268604078]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%3, %e3) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %4 = chlo.cosh %x : tensor<3xf64> -> tensor<3xf64>
    %e4 = stablehlo.constant dense<[1.1276259652, 1.5430806348, 3.7621956911]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%4, %e4) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %5 = chlo.tan %x : tensor<3xf64> -> tensor<3xf64>
    %e5 = stablehlo.constant dense<[0.5463024898, 1.5574077247, -2.1850398633]> : tensor<3xf64>
    stablehlo.custom_call @check.expect_almost_eq(%5, %e5) {has_side_effect = true} : (tensor<3xf64>, tensor<3xf64>) -> ()
    %bx = stablehlo.constant dense<[0.5, 1.0, 2.0]> : tensor<3xbf16>
    %6 = chlo.sinh %bx : tensor<3xbf16> -> tensor<3xbf16>
    %e6 = stablehlo.constant dense<[0.5210953055, 1.1752011936, 3.6268604078]> : tensor<3xbf16>
    stablehlo.custom_call @check.expect_close(%6, %e6) {has_side_effect = true} : (tensor<3xbf16>, tensor<3xbf16>) -> ()
    %z = stablehlo.constant dense<(1.0, 1.0)> : tensor<complex<f64>>
    %7 = chlo.asin %z : tensor<complex<f64>> -> tensor<complex<f64>>
    %e7 = stablehlo.constant dense<(0.6662394325, 1.0612750619)> : tensor<complex<f64>>
    stablehlo.custom_call @check.expect_almost_eq(%7, %e7) {has_side_effect = true} : (tensor<complex<f64>>, tensor<complex<f64>>) -> ()
    %8 = chlo.acos %z : tensor<complex<f64>> -> tensor<complex<f64>>
    %e8 = stablehlo.constant dense<(0.9045568943, -1.0612750619)> : tensor<complex<f64>>
    stablehlo.custom_call @check.expect_almost_eq(%8, %e8) {has_side_effect = true} : (tensor<complex<f64>>, tensor<complex<f64>>) -> ()
    %9 = chlo.acosh %z : tensor<complex<f64>> -> tensor<complex<f64>>
    %e9 = stablehlo.constant dense<(1.0612750619, 0.9045568943)> : tensor<complex<f64>>
    stablehlo.custom_call @check.expect_almost_eq(%9, %e9) {has_side_effect = true} : (tensor<complex<f64>>, tensor<complex<f64>>) -> ()
    %10 = chlo.asinh %z : tensor<complex<f64>> -> tensor<complex<f64>>
    %e10 = stablehlo.constant dense<(1.0612750619, 0.6662394325)> : tensor<complex<f64>>
    stablehlo.custom_call @check.expect_almost_eq(%10, %e10) {has_side_effect = true} : (tensor<complex<f64>>, tensor<complex<f64>>) -> ()
    %zh = stablehlo.constant dense<(0.5, 0.5)> : tensor<complex<f32>>
    %11 = chlo.atanh %zh : tensor<complex<f32>> -> tensor<complex<f32>>
    %e11 = stablehlo.constant dense<(0.4023594781, 0.5535743589)> : tensor<complex<f32>>
    stablehlo.custom_call @check.expect_almost_eq(%11, %e11) {has_side_effect = true} : (tensor<complex<f32>>, tensor<complex<f32>>) -> ()
    %12 = chlo.atan %zh : tensor<complex<f32>> -> tensor<complex<f32>>
    %e12 = stablehlo.constant dense<(0.5535743589, 0.4023594781)> : tensor<complex<f32>>
    stablehlo.custom_call @check.expect_almost_eq(%12, %e12) {has_side_effect = true} : (tensor<complex<f32>>, tensor<complex<f32>>) -> ()
    %13 = chlo.sinh %z : tensor<complex<f64>> -> tensor<complex<f64>>
    %e13 = stablehlo.constant dense<(0.6349639148, 1.2984575814)> : tensor<complex<f64>>
    stablehlo.custom_call @check.expect_almost_eq(%13, %e13) {has_side_effect = true} : (tensor<complex<f64>>, tensor<complex<f64>>) -> ()
    %zs = stablehlo.constant dense<(3.0, 2.0)> : tensor<complex<f32>>
    %14 = chlo.square %zs : tensor<complex<f32>> -> tensor<complex<f32>>
    %e14 = stablehlo.constant dense<(5.0, 12.0)> : tensor<complex<f32>>
    stablehlo.custom_call @check.expect_eq(%14, %e14) {has_side_effect = true} : (tensor<complex<f32>>, tensor<complex<f32>>) -> ()
    %15 = chlo.conj %zs : tensor<complex<f32>> -> tensor<complex<f32>>
    %e15 = stablehlo.constant dense<(3.0, -2.0)> : tensor<complex<f32>>
    stablehlo.custom_call @check.expect_eq(%15, %e15) {has_side_effect = true} : (tensor<complex<f32>>, tensor<complex<f32>>) -> ()
    %inf = stablehlo.constant dense<[0x7F800000, 0xFF800000, 1.0]> : tensor<3xf32>
    %16 = chlo.is_inf %inf : tensor<3xf32> -> tensor<3xi1>
    %e16 = stablehlo.constant dense<[true, true, false]> : tensor<3xi1>
    stablehlo.custom_call @check.expect_eq(%16, %e16) {has_side_effect = true} : (tensor<3xi1>, tensor<3xi1>) -> ()
    %17 = chlo.is_pos_inf %inf : tensor<3xf32> -> tensor<3xi1>
    %e17 = stablehlo.constant dense<[true, false, false]> : tensor<3xi1>
    stablehlo.custom_call @check.expect_eq(%17, %e17) {has_side_effect = true} : (tensor<3xi1>, tensor<3xi1>) -> ()
    %18 = chlo.is_neg_inf %inf : tensor<3xf32> -> tensor<3xi1>
    %e18 = stablehlo.constant dense<[false, true, false]> : tensor<3xi1>
    stablehlo.custom_call @check.expect_eq(%18, %e18) {has_side_effect = true} : (tensor<3xi1>, tensor<3xi1>) -> ()
    return %res : tensor<3xf32>
  }
}
