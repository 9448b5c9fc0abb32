// Locations become each instruction's metadata (op name, file and line), as XLA's import makes
// them: through `#loc` aliases defined after the module, names wrapping file:line, callsite
// (the innermost frame) and fused locations. Warnings then name the user's line. Six rows
// cannot be cut 2 -> 4 at shard boundaries: the copy gathers the whole value first.
// STAGE: partition
// ARGS: --num-partitions 4
// ROOT-SHAPE: f32[2,4]
// WARNING-HAS: involuntary full rematerialization: resharding %copy (from /home/me/model.py:13) from {devices=[2,2]<=[4]} to {devices=[4,1]<=[4]}
// VERIFY
#loc1 = loc("/home/me/model.py":12:10)
module @jit_remat attributes {mhlo.num_partitions = 4 : i32} {
  func.func public @main(%arg0: tensor<6x4xf32> {mhlo.sharding = "{devices=[2,2]<=[4]}"} loc("x")) -> (tensor<6x4xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}) {
    %0 = stablehlo.sine %arg0 {mhlo.sharding = "{devices=[2,2]<=[4]}"} : tensor<6x4xf32> loc(#loc3)
    %1 = stablehlo.copy %0 {mhlo.sharding = "{devices=[4,1]<=[4]}"} : tensor<6x4xf32> loc(#loc5)
    return %1 : tensor<6x4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("/home/me/model.py":13:4)
#loc3 = loc("jit(f)/jit(main)/sin"(#loc1))
#loc4 = loc("jit(f)/jit(main)/copy"(#loc2))
#loc5 = loc(fused[#loc, callsite(#loc4 at #loc1)])
