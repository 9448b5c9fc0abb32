// A manual computation whose body argument is not its operand's local type (dim 0 split over
// the manual axis "a" makes 16 rows 8): one located error, as Shardy's verifier gives (before,
// the partitioner failed later with an unrelated reshard error).
// STAGE: parse
// ERROR: FILE:8:8: error: the manual computation's operand 0 is f32[16,8] in its body, not f32[8,8] (f32[16,8] split over its manual axes)
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<16x8xf32>) {
    sdy.return %arg1 : tensor<16x8xf32>
  } : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}
