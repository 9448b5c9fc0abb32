// A module whose every function is called by another (here one that calls itself) has no entry:
// HLO's entry computation cannot be called. It is one error, not a module printed as HLO text
// that does not read back (fuzz_parse).
// STAGE: parse
// ERROR: self_call.mlir:1:1: error: every function is called by another: no entry function
func.func private @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @f(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
