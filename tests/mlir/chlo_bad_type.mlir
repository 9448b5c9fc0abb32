// A chlo special function on an element type it does not take (integers): a located error.
// STAGE: parse
// ERROR: FILE:7:10: error: 'chlo.lgamma' of s32[2] is not supported
module {
  func.func public @main() -> tensor<2xi32> {
    %0 = stablehlo.constant dense<1> : tensor<2xi32>
    %1 = chlo.lgamma %0 : tensor<2xi32> -> tensor<2xi32>
    return %1 : tensor<2xi32>
  }
}
