// A bound on a static dimension: a located error.
// STAGE: parse
// ERROR: bounds_on_static.mlir:5:63: error: a bound on static dimension 1 (of size 4)
module @jit_bad {
  func.func @main(%arg0: tensor<?x4xf32, #stablehlo.bounds<8, 3>>) -> tensor<?x4xf32, #stablehlo.bounds<8, ?>> {
    return %arg0 : tensor<?x4xf32, #stablehlo.bounds<8, ?>>
  }
}
