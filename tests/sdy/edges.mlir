// `gspmd sdy-opt FILE -sdy-basic-propagate` prints edges.expected (ctest sdy/edges):
// - @main: a sharding inside a manual computation reaches the operand outside through the
//   region's edge ("b" manual, "a" added after it), and the function result's "c" reaches the
//   body through the result's edge;
// - @group: sdy.sharding_group makes %arg1 take %arg0's sharding, and is printed back;
// - @loop: a while whose regions use %c1 and %c32 from around it prints them as themselves;
// - @rng: rng_bit_generator keeps its algorithm and prints in its pretty form, its results named
//   as MLIR names them.
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>

func.func @main(%arg0: tensor<16x8x8xf32>)
    -> (tensor<16x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}, {"c", ?}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"b", ?}, {?}, {?}]>] out_shardings=[<@mesh, [{"b", ?}, {?}, {?}]>] manual_axes={"b"} (%arg1: tensor<8x8x8xf32>) {
    %1 = stablehlo.negate %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}, {?}]>]>} : tensor<8x8x8xf32>
    sdy.return %1 : tensor<8x8x8xf32>
  } : (tensor<16x8x8xf32>) -> tensor<16x8x8xf32>
  return %0 : tensor<16x8x8xf32>
}

func.func @group(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>},
                 %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  sdy.sharding_group %arg0 group_id=3 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=3 : tensor<8x8xf32>
  %0 = stablehlo.subtract %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

func.func @loop(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c32 = stablehlo.constant dense<32> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x8xf32>, tensor<i32>
    cond {
    %1 = stablehlo.compare  LT, %iterArg_0, %c32 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    %2 = stablehlo.cosine %iterArg : tensor<8x8xf32>
    stablehlo.return %2, %1 : tensor<8x8xf32>, tensor<i32>
  }
  return %0#0 : tensor<8x8xf32>
}

func.func @rng(%arg0: tensor<2xui64>) -> (tensor<2xui64>, tensor<4x8xui32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) {
  %output_state, %output = stablehlo.rng_bit_generator %arg0, algorithm = PHILOX : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4x8xui32>)
  return %output_state, %output : tensor<2xui64>, tensor<4x8xui32>
}
