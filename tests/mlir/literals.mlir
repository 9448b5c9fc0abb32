// StableHLO literals of every form read into the same values: hex, splat, nested lists, bools,
// hex float bit patterns, complex (parts as numbers or as f32/f64 bit patterns, the way MLIR
// prints NaN and infinities); checks that hold exit 0.
// STAGE: eval
// OUT0: f32[2] 1 2
module @jit_literals attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
    %1 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_eq(%0, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    %2 = stablehlo.constant dense<3> : tensor<2x2xi32>
    %3 = stablehlo.constant dense<[[3, 3], [3, 3]]> : tensor<2x2xi32>
    stablehlo.custom_call @check.expect_eq(%2, %3) {has_side_effect = true} : (tensor<2x2xi32>, tensor<2x2xi32>) -> ()
    %4 = stablehlo.constant dense<[true, false]> : tensor<2xi1>
    %5 = stablehlo.constant dense<"0x0100"> : tensor<2xi1>
    stablehlo.custom_call @check.expect_eq(%4, %5) {has_side_effect = true} : (tensor<2xi1>, tensor<2xi1>) -> ()
    %6 = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %7 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %8 = stablehlo.divide %6, %6 : tensor<f32>
    stablehlo.custom_call @check.expect_close(%8, %7) {has_side_effect = true} : (tensor<f32>, tensor<f32>) -> ()
    %9 = stablehlo.constant dense<(1.0, -2.5)> : tensor<complex<f32>>
    %10 = stablehlo.constant dense<"0x0000803F000020C0"> : tensor<complex<f32>>
    stablehlo.custom_call @check.expect_eq(%9, %10) {has_side_effect = true} : (tensor<complex<f32>>, tensor<complex<f32>>) -> ()
    %11 = stablehlo.constant dense<[1.0, 2.0005]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_almost_eq(%11, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    %12 = stablehlo.constant dense<[255, 1]> : tensor<2xui8>
    %13 = stablehlo.constant dense<[(0x7F800000, 0x3F800000), (2.0, 0xFF800000)]> : tensor<2xcomplex<f32>>
    %14 = stablehlo.constant dense<"0x0000807F0000803F00000040000080FF"> : tensor<2xcomplex<f32>>
    stablehlo.custom_call @check.expect_eq(%13, %14) {has_side_effect = true} : (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) -> ()
    %15 = stablehlo.constant dense<(0x3FF0000000000000, 0xFFF0000000000000)> : tensor<complex<f64>>
    %16 = stablehlo.constant dense<(1.0, 0xFFF0000000000000)> : tensor<complex<f64>>
    %17 = stablehlo.real %15 : (tensor<complex<f64>>) -> tensor<f64>
    %18 = stablehlo.constant dense<1.0> : tensor<f64>
    stablehlo.custom_call @check.expect_eq(%17, %18) {has_side_effect = true} : (tensor<f64>, tensor<f64>) -> ()
    stablehlo.custom_call @check.expect_eq(%15, %16) {has_side_effect = true} : (tensor<complex<f64>>, tensor<complex<f64>>) -> ()
    %19 = stablehlo.constant dense<"0x0102"> : tensor<2xi1>
    %20 = stablehlo.constant dense<[true, true]> : tensor<2xi1>
    stablehlo.custom_call @check.expect_eq(%19, %20) {has_side_effect = true} : (tensor<2xi1>, tensor<2xi1>) -> ()
    "check.expect_eq_const"(%12) <{value = dense<"0xFF01"> : tensor<2xui8>}> : (tensor<2xui8>) -> ()
    return %0 : tensor<2xf32>
  }
}
