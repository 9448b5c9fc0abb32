// An op the reader does not know: one located error.
// STAGE: parse
// ERROR: FILE:6:10: error: unknown or unsupported op 'stablehlo.frobnicate'
module {
  func.func public @main() -> tensor<f32> {
    %0 = stablehlo.frobnicate : tensor<f32>
    return %0 : tensor<f32>
  }
}
