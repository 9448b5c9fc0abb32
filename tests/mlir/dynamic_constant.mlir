// A constant of a dynamic type has no size to fill: a located error (it ran out of memory).
// STAGE: parse
// ERROR: dynamic_constant.mlir:6:35: error: a dense literal needs every dimension's size: dimension 0 is dynamic ('?')
module @jit_bad {
  func.func @main() -> tensor<?xf32> {
    %0 = stablehlo.constant dense<1.0> : tensor<?xf32>
    return %0 : tensor<?xf32>
  }
}
