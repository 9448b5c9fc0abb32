// A function that returns an unsharded copy of a sharded op (fuzz_parse): StableHLO has no copy,
// so the printed text returns the op, whose sharding reads back as the function's result. The
// first print now says so too, so printing is a fixed point (ctest sdy/root_copy_alias).
// STAGE: parse
module @jit_f attributes {mhlo.num_partitions = 4 : i32} {
  func.func public @main(%arg0: tensor<6x4xf32> {mhlo.sharding = "{devices=[2,2]<=[4]}"}) -> (tensor<6x4xf32>) {
    %0 = stablehlo.sine %arg0 {mhlo.sharding = "{devices=[2,2]<=[4]}"} : tensor<6x4xf32>
    %1 = stablehlo.copy %0 : tensor<6x4xf32>
    return %1 : tensor<6x4xf32>
  }
}
