// A tensor type whose size in bytes overflows 64 bits: one located error, no allocation
// (fuzz_parse found the reader allocating for it).
// STAGE: parse
// ERROR: FILE:7:51: error: tensor type is too large: its size in bytes overflows 64 bits
module {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<[[1.0, 2.0]]> : tensor<888888888888881x88888888x2xf32>
    return %0 : tensor<2xf32>
  }
}
