// A check that does not hold: exit 1, located at the check, naming it and the first mismatch.
// STAGE: eval
// ERROR: FILE:8:5: error: custom-call custom-call: check.expect_close failed: element [1] is 2, expected 2.5
module {
  func.func public @main() {
    %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %1 = stablehlo.constant dense<[1.0, 2.5]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%0, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return
  }
}
