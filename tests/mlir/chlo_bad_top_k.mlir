// chlo.top_k with k larger than the last dim: a located error, not an out-of-range topk.
// STAGE: parse
// ERROR: FILE:7:12: error: k = 4 does not fit the last dim of 'chlo.top_k'
module {
  func.func public @main() -> tensor<4xf32> {
    %0 = stablehlo.constant dense<1.0> : tensor<3xf32>
    %1:2 = chlo.top_k(%0, k = 4) : tensor<3xf32> -> (tensor<4xf32>, tensor<4xi32>)
    return %1#0 : tensor<4xf32>
  }
}
