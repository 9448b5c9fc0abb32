// `gspmd sdy-opt FILE` prints manual.expected (ctest sdy/manual): sdy.manual_computation,
// which the reader lowers as XLA's export does (Sharding + SPMDFullToShardShape per operand, a
// call of the body, Sharding + SPMDShardToFullShape per result), printed back as one op with
// its body inline: two operands, two results, manual on "a" only (the body keeps "b").
sdy.mesh @mesh = <["a"=2, "b"=2]>

func.func @manual(%arg0: tensor<16x32xf32>, %arg1: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %0:2 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"a"}, {"b", ?}]>, <@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>, <@mesh, [{"a"}, {"b"}]>] manual_axes={"a"} (%arg2: tensor<8x32xf32>, %arg3: tensor<8x32xf32>) {
    %1 = stablehlo.add %arg2, %arg3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>} : tensor<8x32xf32>
    %2 = stablehlo.multiply %1, %arg3 : tensor<8x32xf32>
    sdy.return %1, %2 : tensor<8x32xf32>, tensor<8x32xf32>
  } : (tensor<16x32xf32>, tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>)
  %3 = stablehlo.add %0#0, %0#1 : tensor<16x32xf32>
  return %3, %0#1 : tensor<16x32xf32>, tensor<16x32xf32>
}
