// A short `[...]` list for a large type is an error before any allocation for the type
// (fuzz_parse found the reader allocating for the type first).
// STAGE: parse
// ERROR: FILE:7:35: error: dense literal is shorter than the type's 400000000 elements
module {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<[[1.0, 2.0]]> : tensor<200000000x2xi8>
    return %0 : tensor<2xf32>
  }
}
