// Host transfers and channels: stablehlo.infeed/outfeed/send/recv read as HLO's
// infeed/outfeed, send/send-done and recv/recv-done (printed back the same: mlir.roundtrip),
// partitioned around them (their own shardings replicated or on device 0).
// STAGE: partition
// ROOT-SHAPE: f32[4,2]
module @jit_transfers attributes {mhlo.num_partitions = 2 : i32} {
  func.func public @main(%arg0: tensor<8x2xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) -> (tensor<8x2xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) {
    %0 = stablehlo.after_all : !stablehlo.token
    %a:2 = "stablehlo.infeed"(%0) {infeed_config = "in", mhlo.sharding = "{{replicated}, {maximal device=0}}"} : (!stablehlo.token) -> (tensor<8x2xf32>, !stablehlo.token)
    %1:3 = "stablehlo.infeed"(%a#1) {infeed_config = "", mhlo.sharding = "{{replicated}, {replicated}, {maximal device=0}}"} : (!stablehlo.token) -> (tensor<8x2xf32>, tensor<2xf32>, !stablehlo.token)
    %2 = "stablehlo.send"(%1#1, %1#2) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = true} : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
    %3:2 = "stablehlo.recv"(%2) {channel_handle = #stablehlo.channel_handle<handle = 2, type = 3>, is_host_transfer = true} : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    %4 = "stablehlo.outfeed"(%3#0, %3#1) {outfeed_config = ""} : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
    %5 = stablehlo.add %arg0, %a#0 : tensor<8x2xf32>
    %6 = stablehlo.add %5, %1#0 : tensor<8x2xf32>
    return %6 : tensor<8x2xf32>
  }
}
