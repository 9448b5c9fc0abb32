// A Shardy sharding naming a mesh the module does not declare: one located error.
// STAGE: parse
// ERROR: FILE:5:77: error: mesh @nomesh is not defined
module @m attributes {mhlo.num_partitions = 2 : i32} {
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@nomesh, [{"x"}]>}) -> tensor<8xf32> {
    return %arg0 : tensor<8xf32>
  }
}
