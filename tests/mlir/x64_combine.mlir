// XLA's 64-bit emulation custom calls: X64Combine(low, high) = high << 32 | low, bit for bit,
// and X64SplitLow / X64SplitHigh take a 64-bit value apart. The interpreter treated
// X64Combine as a pass-through and failed with an internal error on two operands (Shardy's
// cx64_combine_used_then_rng_bit_generator case). 2 << 32 | 1 = 8589934593; the f64 1.0
// (0x3FF0000000000000) splits into 0 and 0x3FF00000 = 1072693248.
// STAGE: eval
// OUT0: u64[2] 8589934593 4294967295
// OUT1: u32[2] 0 0
// OUT2: u32[2] 1072693248 1072693248
func.func @main() -> (tensor<2xui64>, tensor<2xui32>, tensor<2xui32>) {
  %lo = stablehlo.constant dense<[1, 4294967295]> : tensor<2xui32>
  %hi = stablehlo.constant dense<[2, 0]> : tensor<2xui32>
  %0 = stablehlo.custom_call @X64Combine(%lo, %hi) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
  %one = stablehlo.constant dense<1.0> : tensor<2xf64>
  %1 = stablehlo.custom_call @X64SplitLow(%one) : (tensor<2xf64>) -> tensor<2xui32>
  %2 = stablehlo.custom_call @X64SplitHigh(%one) : (tensor<2xf64>) -> tensor<2xui32>
  return %0, %1, %2 : tensor<2xui64>, tensor<2xui32>, tensor<2xui32>
}
