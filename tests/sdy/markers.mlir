// `gspmd sdy-opt FILE` prints markers.expected (ctest sdy/markers): Shardy's marker ops, which
// the reader keeps as custom-calls of their own name, printed back as written (and, with
// --emit mlir, printing is a fixed point: tests/mlir_roundtrip.py).
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>

func.func @markers(%arg0: tensor<8x16xf32>, %arg1: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = sdy.data_flow_edge %arg0 sharding=<@mesh, [{"a", ?}, {?}]> : tensor<8x16xf32>
  %1 = sdy.data_flow_edge %arg1 : tensor<8x16xf32>
  %2 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<8x16xf32>
  %3 = stablehlo.add %2, %1 : tensor<8x16xf32>
  %4 = sdy.reshard %3 <@mesh, [{"a"}, {}], unreduced={"c"}> : tensor<8x16xf32>
  %5 = sdy.func_data_flow_edge %4 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}p1, {}]>]>} : tensor<8x16xf32>
  %6 = sdy.func_data_flow_edge %5 : tensor<8x16xf32>
  return %6 : tensor<8x16xf32>
}
