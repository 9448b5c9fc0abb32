// A use of a value never defined: one located error.
// STAGE: parse
// ERROR: FILE:6:27: error: use of undefined value '%7'
module {
  func.func public @main() -> tensor<f32> {
    %0 = stablehlo.negate %7 : tensor<f32>
    return %0 : tensor<f32>
  }
}
