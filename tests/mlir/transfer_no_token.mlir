// stablehlo.send needs a token as its last operand: a located error.
// STAGE: parse
// ERROR: transfer_no_token.mlir:7:10: error: stablehlo.send takes its values and a !stablehlo.token last
module @jit_bad {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.after_all : !stablehlo.token
    %1 = "stablehlo.send"(%arg0) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>} : (tensor<2xf32>) -> !stablehlo.token
    return %arg0 : tensor<2xf32>
  }
}
