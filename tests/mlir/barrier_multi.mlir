// An optimization barrier over two values in its pretty form, one result per operand (as
// stablehlo-opt prints it; the reader counted one result). HLO's barrier takes the tuple of the
// operands. Shardy's propagation carries each operand's sharding to its own result through the
// barrier's data-flow edges.
// STAGE: propagate
// ARGS: --algorithm shardy
// SHARDING: add {mesh['a'=2,'b'=2] [{'a', ?}, {?}]}
// SHARDING: opt-barrier {{mesh['a'=2,'b'=2] [{'a', ?}, {?}]}, {mesh['a'=2,'b'=2] [{'b', ?}, {?}]}}
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<32x96xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {?}]>},
                %arg1: tensor<32x96xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>}) -> (tensor<32x96xf32>, tensor<32x96xf32>) {
  %0 = stablehlo.add %arg0, %arg0 : tensor<32x96xf32>
  %1:2 = stablehlo.optimization_barrier %0, %arg1 : tensor<32x96xf32>, tensor<32x96xf32>
  return %1#0, %1#1 : tensor<32x96xf32>, tensor<32x96xf32>
}
