// `stablehlo.case` and `stablehlo.if` (JAX's lax.switch and lax.cond) whose branches use values
// from around them: each branch becomes a computation of the tuple of the values it uses. An
// index out of range runs the last branch, as XLA does.
// STAGE: eval
// OUT0: f32[2] 3 -3
module @jit_switch {
  func.func private @switch(%i: tensor<i32>, %x: tensor<2xf32>) -> tensor<2xf32> {
    %two = stablehlo.constant dense<2.0> : tensor<2xf32>
    %0 = "stablehlo.case"(%i) ({
      %1 = stablehlo.add %x, %two : tensor<2xf32>
      stablehlo.return %1 : tensor<2xf32>
    }, {
      %1 = stablehlo.multiply %x, %two : tensor<2xf32>
      stablehlo.return %1 : tensor<2xf32>
    }, {
      stablehlo.return %two : tensor<2xf32>
    }) : (tensor<i32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func public @main() -> tensor<2xf32> {
    %x = stablehlo.constant dense<[1.0, -5.0]> : tensor<2xf32>
    %i0 = stablehlo.constant dense<0> : tensor<i32>
    %i1 = stablehlo.constant dense<1> : tensor<i32>
    %i9 = stablehlo.constant dense<9> : tensor<i32>
    %a = call @switch(%i0, %x) : (tensor<i32>, tensor<2xf32>) -> tensor<2xf32>
    %b = call @switch(%i1, %x) : (tensor<i32>, tensor<2xf32>) -> tensor<2xf32>
    %c = call @switch(%i9, %x) : (tensor<i32>, tensor<2xf32>) -> tensor<2xf32>
    %ea = stablehlo.constant dense<[3.0, -3.0]> : tensor<2xf32>
    %eb = stablehlo.constant dense<[2.0, -10.0]> : tensor<2xf32>
    %ec = stablehlo.constant dense<[2.0, 2.0]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_eq(%a, %ea) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    stablehlo.custom_call @check.expect_eq(%b, %eb) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    stablehlo.custom_call @check.expect_eq(%c, %ec) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    %t = stablehlo.constant dense<true> : tensor<i1>
    %f = stablehlo.constant dense<false> : tensor<i1>
    %p:2 = "stablehlo.if"(%t) ({
      %n = stablehlo.negate %a : tensor<2xf32>
      stablehlo.return %n, %b : tensor<2xf32>, tensor<2xf32>
    }, {
      stablehlo.return %a, %b : tensor<2xf32>, tensor<2xf32>
    }) : (tensor<i1>) -> (tensor<2xf32>, tensor<2xf32>)
    %q = "stablehlo.if"(%f) ({
      stablehlo.return %p#0 : tensor<2xf32>
    }, {
      %n = stablehlo.negate %p#0 : tensor<2xf32>
      stablehlo.return %n : tensor<2xf32>
    }) : (tensor<i1>) -> tensor<2xf32>
    stablehlo.custom_call @check.expect_eq(%q, %ea) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    stablehlo.custom_call @check.expect_eq(%p#1, %eb) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %q : tensor<2xf32>
  }
}
