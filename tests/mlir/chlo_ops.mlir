// chlo ops with several operands or results, in pretty and generic forms: top_k (values and
// indices, ties keep the first index), next_after, broadcast_* with broadcast_dimensions.
// STAGE: eval
// OUT0: s32[2,2] 2 0 1 2
module @jit_chlo_ops {
  func.func public @main() -> tensor<2x2xi32> {
    %x = stablehlo.constant dense<[[5, 1, 7], [2, 9, 9]]> : tensor<2x3xi32>
    %v, %i = chlo.top_k(%x, k = 2) : tensor<2x3xi32> -> (tensor<2x2xi32>, tensor<2x2xi32>)
    %ev = stablehlo.constant dense<[[7, 5], [9, 9]]> : tensor<2x2xi32>
    stablehlo.custom_call @check.expect_eq(%v, %ev) {has_side_effect = true} : (tensor<2x2xi32>, tensor<2x2xi32>) -> ()
    %ei = stablehlo.constant dense<[[2, 0], [1, 2]]> : tensor<2x2xi32>
    stablehlo.custom_call @check.expect_eq(%i, %ei) {has_side_effect = true} : (tensor<2x2xi32>, tensor<2x2xi32>) -> ()
    %f = stablehlo.constant dense<[3.0, -1.0, 0x7FC00000, 2.0]> : tensor<4xf32>
    %t:2 = "chlo.top_k"(%f) <{k = 3 : i64}> : (tensor<4xf32>) -> (tensor<3xf32>, tensor<3xi32>)
    %et = stablehlo.constant dense<[0x7FC00000, 3.0, 2.0]> : tensor<3xf32>
    stablehlo.custom_call @check.expect_close(%t#0, %et) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    %a = stablehlo.constant dense<[1.0, 1.0, 0.0, 0x7FC00000]> : tensor<4xf32>
    %b = stablehlo.constant dense<[2.0, 0.0, -1.0, 1.0]> : tensor<4xf32>
    %n = chlo.next_after %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %en = stablehlo.constant dense<[0x3F800001, 0x3F7FFFFF, 0x80000001, 0x7FC00000]> : tensor<4xf32>
    stablehlo.custom_call @check.expect_close(%n, %en) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
    %m = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
    %c = stablehlo.constant dense<[10.0, 20.0]> : tensor<2xf32>
    %s = chlo.broadcast_add %m, %c {broadcast_dimensions = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
    %es = stablehlo.constant dense<[[11.0, 12.0, 13.0], [24.0, 25.0, 26.0]]> : tensor<2x3xf32>
    stablehlo.custom_call @check.expect_eq(%s, %es) {has_side_effect = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
    %row = stablehlo.constant dense<[[2.0, 5.0, 1.0]]> : tensor<1x3xf32>
    %g = "chlo.broadcast_compare"(%m, %row) <{comparison_direction = #chlo<comparison_direction GT>}> : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xi1>
    %eg = stablehlo.constant dense<[[false, false, true], [true, false, true]]> : tensor<2x3xi1>
    stablehlo.custom_call @check.expect_eq(%g, %eg) {has_side_effect = true} : (tensor<2x3xi1>, tensor<2x3xi1>) -> ()
    %two = stablehlo.constant dense<2.0> : tensor<f32>
    %p = chlo.broadcast_power %m, %two : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %ep = stablehlo.constant dense<[[1.0, 4.0, 9.0], [16.0, 25.0, 36.0]]> : tensor<2x3xf32>
    stablehlo.custom_call @check.expect_almost_eq(%p, %ep) {has_side_effect = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
    return %i : tensor<2x2xi32>
  }
}
