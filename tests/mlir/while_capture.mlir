// A while whose condition and body use values from around the loop (%n, %step), as JAX and
// Shardy's tests write them; the reader said "use of undefined value". They ride along as extra
// loop state that the body passes on unchanged, and the loop's results stay its own two. Counts
// i = 0, 2, 4 while i < 5 and adds step to acc each time: (6, 9).
// STAGE: eval
// OUT0: s32[] 6
// OUT1: s32[] 9
func.func @main() -> (tensor<i32>, tensor<i32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %n = stablehlo.constant dense<5> : tensor<i32>
  %step = stablehlo.constant dense<3> : tensor<i32>
  %two = stablehlo.constant dense<2> : tensor<i32>
  %0:2 = stablehlo.while(%i = %zero, %acc = %zero) : tensor<i32>, tensor<i32>
   cond {
    %c = stablehlo.compare  LT, %i, %n,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %a = stablehlo.add %acc, %step : tensor<i32>
    %j = stablehlo.add %i, %two : tensor<i32>
    stablehlo.return %j, %a : tensor<i32>, tensor<i32>
  }
  return %0#0, %0#1 : tensor<i32>, tensor<i32>
}
