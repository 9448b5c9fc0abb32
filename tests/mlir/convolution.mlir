// convolution in its pretty form: dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f] maps to HLO's
// dim_labels=b0f_0io->b0f, window = {stride, pad, lhs_dilate, rhs_dilate, reverse} to window={}
// (sizes from the kernel), the trailing {..} dict to feature_group_count and the like.
// x = [1, 2, 3, 4], k = [1, 10].
// STAGE: eval
// OUT0: f32[1,3,1] 10 32 4
module @jit_convolution {
  func.func public @main() -> tensor<1x3x1xf32> {
    %x = stablehlo.constant dense<[[[1.0], [2.0], [3.0], [4.0]]]> : tensor<1x4x1xf32>
    %k = stablehlo.constant dense<[[[1.0]], [[10.0]]]> : tensor<2x1x1xf32>
    %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [2], pad = [[1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1x4x1xf32>, tensor<2x1x1xf32>) -> tensor<1x3x1xf32>
    %1 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {lhs_dilate = [2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x1xf32>, tensor<2x1x1xf32>) -> tensor<1x6x1xf32>
    %2 = stablehlo.constant dense<[[[1.0], [20.0], [2.0], [30.0], [3.0], [40.0]]]> : tensor<1x6x1xf32>
    stablehlo.custom_call @check.expect_close(%1, %2) {has_side_effect = true} : (tensor<1x6x1xf32>, tensor<1x6x1xf32>) -> ()
    %3 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {rhs_dilate = [2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x1xf32>, tensor<2x1x1xf32>) -> tensor<1x2x1xf32>
    %4 = stablehlo.constant dense<[[[31.0], [42.0]]]> : tensor<1x2x1xf32>
    stablehlo.custom_call @check.expect_close(%3, %4) {has_side_effect = true} : (tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> ()
    %5 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {reverse = [true]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x1xf32>, tensor<2x1x1xf32>) -> tensor<1x3x1xf32>
    %6 = stablehlo.constant dense<[[[12.0], [23.0], [34.0]]]> : tensor<1x3x1xf32>
    stablehlo.custom_call @check.expect_close(%5, %6) {has_side_effect = true} : (tensor<1x3x1xf32>, tensor<1x3x1xf32>) -> ()
    %y = stablehlo.constant dense<[[[1.0, 2.0], [3.0, 4.0]]]> : tensor<1x2x2xf32>
    %j = stablehlo.constant dense<[[[1.0], [10.0]]]> : tensor<1x2x1xf32>
    %7 = stablehlo.convolution(%y, %j) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x2x2xf32>, tensor<1x2x1xf32>) -> tensor<1x1x2xf32>
    %8 = stablehlo.constant dense<[[[31.0, 42.0]]]> : tensor<1x1x2xf32>
    stablehlo.custom_call @check.expect_close(%7, %8) {has_side_effect = true} : (tensor<1x1x2xf32>, tensor<1x1x2xf32>) -> ()
    return %0 : tensor<1x3x1xf32>
  }
}
