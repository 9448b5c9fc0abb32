// A custom-call's backend_config with quotes (`\22` in MLIR's text) is kept escaped, so HLO and
// StableHLO print it back readable (it printed the quotes bare); a called computation the
// module does not define is left out, as MLIR does not check it (Shardy's tests extract such
// functions alone), and one it defines is kept (mlir.roundtrip prints and reads both back).
// STAGE: parse
module @jit_cc {
  func.func private @gt(%a: tensor<f32>, %b: tensor<f32>, %i: tensor<i32>, %j: tensor<i32>) -> tensor<i1> {
    %0 = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    return %0 : tensor<i1>
  }
  func.func public @main(%arg0: tensor<16x4xf32>, %arg1: tensor<16x4xi32>) -> (tensor<16x2xf32>, tensor<16x2xi32>, tensor<16x2xf32>, tensor<16x2xi32>) {
    %0:2 = stablehlo.custom_call @TopK(%arg0, %arg1) {backend_config = "{\22k\22: 2, \22path\22: \22a\\b\22}", called_computations = [@gt]} : (tensor<16x4xf32>, tensor<16x4xi32>) -> (tensor<16x2xf32>, tensor<16x2xi32>)
    %1:2 = stablehlo.custom_call @Other(%arg0, %arg1) {called_computations = [@elsewhere]} : (tensor<16x4xf32>, tensor<16x4xi32>) -> (tensor<16x2xf32>, tensor<16x2xi32>)
    return %0#0, %0#1, %1#0, %1#1 : tensor<16x2xf32>, tensor<16x2xi32>, tensor<16x2xf32>, tensor<16x2xi32>
  }
}
