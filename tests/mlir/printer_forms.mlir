// The StableHLO printer's forms (src/mlir/printer.c), as `gspmd parse --emit mlir` prints them
// from HLO: a private function returning two results (`%3:2 = call`), a variadic reduce and a
// two-operand sort in the generic form with `^bb0` regions, `%N#i` uses, -inf as a bit pattern
// and a denormal that reads back bit-exactly. Printing this file is a fixed point
// (tests/mlir_roundtrip.py); the outputs are argmax of 2*v, v sorted with its indices, and 2*v.
// STAGE: eval
// OUT0: f32[] 7
// OUT1: s32[] 1
// OUT2: f32[4] -2 1.401298464324817e-45 0.10000000149011612 3.5
// OUT3: s32[4] 2 3 0 1
// OUT4: f32[4] 0.20000000298023224 7 -4 2.802596928649634e-45
module @printer_forms attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func private @scale(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<4xf32>
    return %1, %arg1 : tensor<4xf32>, tensor<f32>
  }
  func.func public @main() -> (tensor<f32>, tensor<i32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) {
    %0 = stablehlo.constant dense<[1.0e-01, 3.5e+00, -2.0e+00, 1.0e-45]> : tensor<4xf32>
    %1 = stablehlo.iota dim = 0 : tensor<4xi32>
    %2 = stablehlo.constant dense<2.0e+00> : tensor<f32>
    %3:2 = call @scale(%0, %2) : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
    %4 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %5 = stablehlo.constant dense<0> : tensor<i32>
    %6:2 = "stablehlo.reduce"(%3#0, %1, %4, %5) <{dimensions = array<i64: 0>}> ({
      ^bb0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<f32>, %arg3: tensor<i32>):
        %7 = stablehlo.compare  GE, %arg0, %arg2 : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %8 = stablehlo.select %7, %arg0, %arg2 : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
        %9 = stablehlo.select %7, %arg1, %arg3 : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
        stablehlo.return %8, %9 : tensor<f32>, tensor<i32>
    }) : (tensor<4xf32>, tensor<4xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
    %10:2 = "stablehlo.sort"(%0, %1) <{dimension = 0 : i64}> ({
      ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>, %arg6: tensor<i32>, %arg7: tensor<i32>):
        %11 = stablehlo.compare  LT, %arg4, %arg5 : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %11 : tensor<i1>
    }) : (tensor<4xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>)
    return %6#0, %6#1, %10#0, %10#1, %3#0 : tensor<f32>, tensor<i32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>
  }
}
