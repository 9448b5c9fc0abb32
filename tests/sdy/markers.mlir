// `gspmd sdy-opt FILE` prints markers.expected (ctest sdy/markers): Shardy's marker ops, which
// the reader keeps as custom-calls of their own name, printed back as written (and, with
// --emit mlir, printing is a fixed point: tests/mlir_roundtrip.py); a two-value
// optimization_barrier in its pretty form and a pretty reduce, each with per-value shardings;
// an sdy.constant.
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>

func.func @markers(%arg0: tensor<8x16xf32>, %arg1: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = sdy.data_flow_edge %arg0 sharding=<@mesh, [{"a", ?}, {?}]> : tensor<8x16xf32>
  %1 = sdy.data_flow_edge %arg1 : tensor<8x16xf32>
  %2 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<8x16xf32>
  %3 = stablehlo.add %2, %1 : tensor<8x16xf32>
  %4 = sdy.reshard %3 <@mesh, [{"a"}, {}], unreduced={"c"}> : tensor<8x16xf32>
  %5 = sdy.func_data_flow_edge %4 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}p1, {}]>]>} : tensor<8x16xf32>
  %6 = sdy.func_data_flow_edge %5 : tensor<8x16xf32>
  %7:2 = stablehlo.optimization_barrier {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>, <@mesh, [{"b"}, {}]>]>} %6, %arg1 : tensor<8x16xf32>, tensor<8x16xf32>
  %8 = sdy.constant dense<0.0> : tensor<f32>
  %9:2 = stablehlo.reduce(%7#0 init: %8), (%7#1 init: %8) across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}]>, <@mesh, [{?}]>]>} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
    reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<f32>, %d: tensor<f32>) {
      %10 = stablehlo.add %a, %c : tensor<f32>
      %11 = stablehlo.add %b, %d : tensor<f32>
      stablehlo.return %10, %11 : tensor<f32>, tensor<f32>
    }
  %12 = stablehlo.add %9#0, %9#1 : tensor<8xf32>
  %13 = stablehlo.broadcast_in_dim %12, dims = [0] : (tensor<8xf32>) -> tensor<8x16xf32>
  return %13 : tensor<8x16xf32>
}
