// A sharding rule that does not fit its op (one dim for a rank-2 operand) is a located error.
// STAGE: parse
// ERROR: custom_rule_bad.mlir:7:63: error: operand 0 has rank 2 but the rule maps 1 dims
sdy.mesh @mesh = <["a"=2]>

func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.custom_call @foo(%arg0) {sdy.sharding_rule = #sdy.op_sharding_rule<([i])->([i, j]) {i=8, j=8}, custom>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %0 : tensor<8x8xf32>
}
