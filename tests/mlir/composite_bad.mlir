// A composite without its decomposition: one located error at the op.
// STAGE: parse
// ERROR: FILE:7:10: error: stablehlo.composite needs decomposition = @function
module @m {
  func.func public @main() -> tensor<2xf32> {
    %a = stablehlo.constant dense<[2.0, -1.0]> : tensor<2xf32>
    %0 = stablehlo.composite "my.op" %a {version = 1 : i32} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
