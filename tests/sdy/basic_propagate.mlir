// -sdy-basic-propagate on Shardy's `simple` case (basic_propagation.mlir): the add's operands
// agree, the dot passes "a" on its free dim and "b" back along its contracting dim.
sdy.mesh @mesh_a_2_b_2 = <["a"=2, "b"=2]>

func.func @simple(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a"}, {"b"}]>},
                  %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] :
    (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
