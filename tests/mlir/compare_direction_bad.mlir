// A comparison direction that is none of EQ, NE, GE, GT, LE, LT is one located error (fuzz_parse:
// `G$` was kept and printed as HLO text the HLO reader rejects).
// STAGE: parse
// ERROR-HAS: unknown comparison direction 'G$'
func.func @main(%a: tensor<f32>, %b: tensor<f32>) -> tensor<i1> {
  %0 = stablehlo.compare  G$, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
  return %0 : tensor<i1>
}
