// `gspmd sdy-opt FILE` (no pass) prints module_header.expected (ctest sdy/module_header): the
// module op as written (its name and attributes), meshes (one with device ids), a function
// without results, shardings with open dims, priorities, sub-axes and replicated axes; the
// returned op's sharding apart from the function result's (@h, @k), as Shardy has them.
module @header attributes {mhlo.num_partitions = 8 : i32,
                           mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  sdy.mesh @other = <["z"=8], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>
  func.func public @f(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}p0, {"y":(1)2}], replicated={"y":(2)2}>}) -> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@other, [{"z"}, {}]>}, tensor<4x8xf32>) {
    %0 = stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"x"}p2]>]>} : tensor<4x8xf32>
    %1 = stablehlo.negate %0 : tensor<4x8xf32>
    %2 = stablehlo.cosine %0 : tensor<4x8xf32>
    return %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>
  }
  func.func private @g() {
    return
  }
  func.func private @h(%arg0: tensor<8xf32>) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
    %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
  func.func private @k(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}]>]>} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
