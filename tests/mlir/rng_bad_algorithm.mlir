// An rng_bit_generator algorithm StableHLO does not have: one located error (the reader used to
// drop the algorithm, so PHILOX ran as the default).
// STAGE: parse
// ERROR: FILE:6:10: error: unknown rng algorithm 'MERSENNE'
func.func public @main(%arg0: tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>) {
  %0:2 = stablehlo.rng_bit_generator %arg0, algorithm = MERSENNE : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)
  return %0#0, %0#1 : tensor<2xui64>, tensor<4xui32>
}
