// A malformed mhlo.sharding string: the sharding parser's located error, inside the string.
// STAGE: parse
// ERROR: FILE:5:65: error: unterminated sharding: expected '}'
module @m attributes {mhlo.num_partitions = 2 : i32} {
  func.func public @main(%arg0: tensor<8xf32> {mhlo.sharding = "{devices=[2]0,1"}) -> tensor<8xf32> {
    return %arg0 : tensor<8xf32>
  }
}
