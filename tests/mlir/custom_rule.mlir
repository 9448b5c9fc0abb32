// A sharding rule written on an op (`sdy.sharding_rule = #sdy.op_sharding_rule<...>`) is the
// op's rule for Shardy's propagation: here `foo` passes its dims through, dims j and k need
// replication and i and k block propagation, so of the argument's three axes only "b" (on j)
// reaches the result (Shardy's basic_propagation.mlir, blocked_propagation_factor). The rule is
// kept in HLO as XLA keeps it: frontend_attributes={xla.sdy.sharding_rule="..."}.
// STAGE: propagate
// ARGS: --algorithm shardy
// SHARDING: custom-call {mesh['a'=2,'b'=2,'c'=2] [{?}, {'b', ?}, {?}]}
sdy.mesh @mesh_a_2_b_2_c_2 = <["a"=2, "b"=2, "c"=2]>

func.func @blocked_propagation_factor(%arg0: tensor<8x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2_c_2, [{"a"}, {"b"}, {"c"}]>}) -> tensor<8x8x8xf32> {
  %0 = stablehlo.custom_call @foo(%arg0) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k])->([i, j, k]) {i=8, j=8, k=8} need_replication={j, k} blocked_propagation={i, k}, custom>} : (tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  func.return %0 : tensor<8x8x8xf32>
}
