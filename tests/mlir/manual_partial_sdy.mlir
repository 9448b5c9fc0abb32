// Inside a manual computation over "b", the sharding written on an op names the free axes only
// ([{"a", ?}, {?}], replicated "c"); it is that op's local sharding with "b" manual. Shardy's
// propagation keeps the region's manual axes on what it writes: the body's argument gets "a"
// with "b" still manual (Shardy's basic_propagation_manual_computation.mlir,
// replicated_inside_body).
// STAGE: propagate
// ARGS: --algorithm shardy
// SHARDING: parameter {mesh['a'=2,'b'=2,'c'=2,'d'=2,'e'=2,'f'=2,'g'=2] [{'a', ?}, {?}], manual={'b'}}
// SHARDING: add {mesh['a'=2,'b'=2,'c'=2,'d'=2,'e'=2,'f'=2,'g'=2] [{'a', ?}, {?}], replicated={'c'}, manual={'b'}}
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2, "e"=2, "f"=2, "g"=2]>

func.func @replicated_inside_body(%arg0: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"b", ?}, {?}]>] out_shardings=[<@mesh, [{"b", ?}, {?}]>] manual_axes={"b"} (%arg1: tensor<16x32xf32>) {
    %1 = stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}], replicated={"c"}>]>} : tensor<16x32xf32>
    sdy.return %1 : tensor<16x32xf32>
  } : (tensor<32x32xf32>) -> tensor<32x32xf32>
  func.return %0: tensor<32x32xf32>
}
