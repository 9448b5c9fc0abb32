// A manual computation whose sharding puts its manual axis "a" after the free axis "b" in a
// dim: Shardy requires manual axes major-most. One located error.
// STAGE: parse
// ERROR: FILE:7:8: error: the manual computation's result 0: in dim 0 a manual axis comes after a free one (manual axes must be major-most)
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"b", "a"}, {}]>] manual_axes={"a"} (%arg1: tensor<8x8xf32>) {
    sdy.return %arg1 : tensor<8x8xf32>
  } : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}
