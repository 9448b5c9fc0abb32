// A sharding that splits more dimensions than its tensor has: one located error at the value.
// STAGE: parse
// ERROR: FILE:7:40: error: the sharding splits 2 dimensions, the tensor has rank 1
module @m attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {}]> : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
