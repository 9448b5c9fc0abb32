// stablehlo.composite runs as a call of its decomposition, in the pretty and the generic form.
// STAGE: eval
// OUT0: f32[2] 6 -2
module @jit_composite {
  func.func private @my.gelu.impl(%x: tensor<2xf32>, %y: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.multiply %x, %y : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @my.shift.impl(%x: tensor<2xf32>) -> tensor<2xf32> {
    %c = stablehlo.constant dense<1.0> : tensor<2xf32>
    %0 = stablehlo.add %x, %c : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func public @main() -> tensor<2xf32> {
    %a = stablehlo.constant dense<[2.0, -1.0]> : tensor<2xf32>
    %b = stablehlo.constant dense<[2.5, 3.0]> : tensor<2xf32>
    %0 = stablehlo.composite "my.gelu" %a, %b {composite_attributes = {approximate = false}, decomposition = @my.gelu.impl, version = 1 : i32} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %1 = "stablehlo.composite"(%0) <{composite_attributes = {n = 1 : i64}, decomposition = @my.shift.impl, name = "my.shift"}> : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}
