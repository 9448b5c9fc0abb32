// A reduce in its pretty form with an attribute dictionary after `across dimensions`, as Shardy
// writes a sharding on it; the reader expected ':' there. Shardy's propagation (basic) carries
// the reduce's "b" on its kept dim 1 back to dim 2 of both operands
// (basic_propagation.mlir, propagate_from_multi_result_op).
// STAGE: propagate
// ARGS: --algorithm shardy
// SHARDING: arg0 {mesh['a'=2,'b'=2] [{?}, {?}, {'b', ?}]}
// SHARDING: arg1 {mesh['a'=2,'b'=2] [{?}, {?}, {'b', ?}]}
sdy.mesh @mesh_a_2_b_2 = <["a"=2, "b"=2]>

func.func @propagate_from_multi_result_op(%arg0: tensor<4x64x8xf32>, %arg1: tensor<4x64x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1:2 = stablehlo.reduce(%arg0 init: %0), (%arg1 init: %0) across dimensions = [1]
    {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{?}, {"b", ?}]>, <@mesh_a_2_b_2, [{?}, {"b", ?}]>]>} :
    (tensor<4x64x8xf32>, tensor<4x64x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    reducer(%arg2: tensor<f32>, %arg4: tensor<f32>) (%arg3: tensor<f32>, %arg5: tensor<f32>)  {
      %2 = stablehlo.add %arg2, %arg4 : tensor<f32>
      %3 = stablehlo.add %arg3, %arg5 : tensor<f32>
      stablehlo.return %2, %3 : tensor<f32>, tensor<f32>
    }
  return %1#0, %1#1 : tensor<4x8xf32>, tensor<4x8xf32>
}
