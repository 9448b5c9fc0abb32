// Shardy's shardings printed back as written (src/mlir/printer.c): two meshes (one with an
// explicit device order), open and closed dims, priorities, sub-axes, replicated= and
// unreduced= axes, per-value shardings of a two-result op, a sharding constraint and an inline
// mesh. `gspmd parse --emit mlir` prints tests/mlir/sdy_shardings.expected (ctest
// mlir.sdy_print) and printing is a fixed point (tests/mlir_roundtrip.py).
// STAGE: parse
// ARGS: --emit mlir
module @sdy_shardings attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4, "y"=2]>
  sdy.mesh @rev = <["a"=8], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>
  func.func public @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y"}p1]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x":(1)2}, {?}p0], replicated={"y"}>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@rev, [{"a"}, {}]>}, tensor<8xf32>, tensor<8xf32>) {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {?}], unreduced={"y"}>]>} : tensor<8x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"x":(2)2, "y"}]> : tensor<8x8xf32>
    %2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3:2 = "stablehlo.reduce"(%1, %arg0, %2, %2) <{dimensions = array<i64: 1>}> ({
      ^bb0(%a: tensor<f32>, %c: tensor<f32>, %b: tensor<f32>, %d: tensor<f32>):
        %4 = stablehlo.add %a, %b : tensor<f32>
        %5 = stablehlo.add %c, %d : tensor<f32>
        stablehlo.return %4, %5 : tensor<f32>, tensor<f32>
    }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>, <mesh<["z"=8]>, [{"z"}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
    return %1, %3#0, %3#1 : tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>
  }
}
