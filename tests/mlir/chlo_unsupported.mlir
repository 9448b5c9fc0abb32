// A chlo op gspmd does not decompose: a located error naming the op.
// STAGE: parse
// ERROR: FILE:7:10: error: unknown or unsupported op 'chlo.frobnicate'
module {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<1.0> : tensor<2xf32>
    %1 = chlo.frobnicate %0 : tensor<2xf32> -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}
