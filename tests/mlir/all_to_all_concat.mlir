// all_to_all with split_dimension 1 and concat_dimension 0 (HLO's all-to-all splits and
// concatenates along one dim; the reader said "not supported yet"): it becomes HLO's along the
// split dim, then the received chunks move to the concat dim. Device d holds
// 100*d + 10*row + col; each sends columns 2j..2j+1 to device j, which stacks them by sender.
// STAGE: run
// DEVICES: 2
// DEV0.OUT0: s64[4,2] 0 1 10 11 100 101 110 111
// DEV1.OUT0: s64[4,2] 2 3 12 13 102 103 112 113
module @a2a attributes {mhlo.num_partitions = 2 : i32} {
  func.func public @main() -> tensor<4x2xi64> {
    %p = stablehlo.partition_id : tensor<ui32>
    %pc = stablehlo.convert %p : (tensor<ui32>) -> tensor<i64>
    %pb = stablehlo.broadcast_in_dim %pc, dims = [] : (tensor<i64>) -> tensor<2x4xi64>
    %h = stablehlo.constant dense<100> : tensor<2x4xi64>
    %t = stablehlo.constant dense<10> : tensor<2x4xi64>
    %row = stablehlo.iota dim = 0 : tensor<2x4xi64>
    %col = stablehlo.iota dim = 1 : tensor<2x4xi64>
    %a = stablehlo.multiply %pb, %h : tensor<2x4xi64>
    %b = stablehlo.multiply %row, %t : tensor<2x4xi64>
    %c = stablehlo.add %a, %b : tensor<2x4xi64>
    %x = stablehlo.add %c, %col : tensor<2x4xi64>
    %0 = "stablehlo.all_to_all"(%x) {split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 2 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<2x4xi64>) -> tensor<4x2xi64>
    return %0 : tensor<4x2xi64>
  }
}
