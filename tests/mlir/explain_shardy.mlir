// `gspmd propagate --explain NAME` with Shardy's propagation (the default for a module with
// sdy.mesh): the chain from the transpose back through the add (which gave %arg0 %arg1's
// sharding first) to %arg1's annotation, with each step's op, strategy and round.
// STAGE: propagate
// EXPLAIN: transpose
// EXPLAIN-HAS: 'transpose': <@mesh, [{"y", ?}, {"x", ?}]>
// EXPLAIN-HAS: 'transpose' <@mesh, [{"y", ?}, {"x", ?}]>  from 'add' through 'transpose' (aggressive, op-priority round 0, user priority p0)
// EXPLAIN-HAS: 'add' <@mesh, [{"x", ?}, {"y", ?}]>  from 'arg0' through 'add'
// EXPLAIN-HAS: 'arg0' <@mesh, [{"x", ?}, {"y", ?}]>  from 'arg1' through 'add'
// EXPLAIN-HAS: 'arg1' <@mesh, [{"x"}, {"y"}]>  annotation
module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x4xf32>, %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<4x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x4xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}
