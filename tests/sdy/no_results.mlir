// `gspmd sdy-opt FILE -sdy-propagation-pipeline` prints no_results.expected (ctest sdy/no_results):
// a side-effecting custom_call without results keeps the one sharding Shardy allows it, as
// written (replicated on a mesh, or maximal on a one-device mesh), while propagation still runs
// through the values around it.
sdy.mesh @mesh = <["x"=4, "y"=2]>
sdy.mesh @one = <[], device_ids=[3]>

func.func @effects(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<16x8xf32> {
  stablehlo.custom_call @log_value(%arg0) {has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>]>} : (tensor<16x8xf32>) -> ()
  %0 = stablehlo.negate %arg0 : tensor<16x8xf32>
  stablehlo.custom_call @host_callback(%0) {has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<@one, []>]>} : (tensor<16x8xf32>) -> ()
  return %0 : tensor<16x8xf32>
}
