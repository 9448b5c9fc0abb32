// A Shardy sharding naming an axis its mesh lacks: one located error.
// STAGE: parse
// ERROR: FILE:6:86: error: mesh axis 'y' does not exist
module @m attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}) -> tensor<8xf32> {
    return %arg0 : tensor<8xf32>
  }
}
