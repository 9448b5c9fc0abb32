// while in its pretty form: `(%i = %x, ...) : T, ... cond {..} do {..}` becomes HLO's while
// over the tuple of the arguments, condition and body taking that tuple (the regions see only
// their arguments). Sums 0..4 into acc.
// STAGE: eval
// OUT0: s32[] 10
module @jit_while {
  func.func public @main() -> tensor<i32> {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%i = %zero, %acc = %zero) : tensor<i32>, tensor<i32>
     cond {
      %five = stablehlo.constant dense<5> : tensor<i32>
      %c = stablehlo.compare  LT, %i, %five,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %a = stablehlo.add %acc, %i : tensor<i32>
      %n = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %n, %a : tensor<i32>, tensor<i32>
    }
    %1 = stablehlo.constant dense<5> : tensor<i32>
    stablehlo.custom_call @check.expect_eq(%0#0, %1) {has_side_effect = true} : (tensor<i32>, tensor<i32>) -> ()
    return %0#1 : tensor<i32>
  }
}
