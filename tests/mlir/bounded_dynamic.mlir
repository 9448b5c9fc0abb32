// Bounded dynamic dimensions (`?` with #stablehlo.bounds) read as HLO's `<=N` dims, printed
// back the same (mlir.roundtrip); the interpreter runs them at their bound.
// STAGE: eval
// INPUT arg0: f32[2,2] 1 2 3 4
// OUT0: f32[2,2] 2 4 6 8
module @jit_dyn {
  func.func public @main(%arg0: tensor<?x2xf32, #stablehlo.bounds<2, ?>>) -> tensor<?x2xf32, #stablehlo.bounds<2, ?>> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<?x2xf32, #stablehlo.bounds<2, ?>>
    return %0 : tensor<?x2xf32, #stablehlo.bounds<2, ?>>
  }
}
