// Regions nested deeper than 64 levels: one located error, not a stack overflow.
// STAGE: parse
// ERROR-HAS: error: regions nested deeper than 64
module {
 func.func public @main(%p: tensor<i1>) -> tensor<f32> {
 %c = stablehlo.constant dense<1.0> : tensor<f32>
%r69 = "stablehlo.if"(%p) ({ %r68 = "stablehlo.if"(%p) ({ %r67 = "stablehlo.if"(%p) ({ %r66 = "stablehlo.if"(%p) ({ %r65 = "stablehlo.if"(%p) ({ %r64 = "stablehlo.if"(%p) ({ %r63 = "stablehlo.if"(%p) ({ %r62 = "stablehlo.if"(%p) ({ %r61 = "stablehlo.if"(%p) ({ %r60 = "stablehlo.if"(%p) ({ %r59 = "stablehlo.if"(%p) ({ %r58 = "stablehlo.if"(%p) ({ %r57 = "stablehlo.if"(%p) ({ %r56 = "stablehlo.if"(%p) ({ %r55 = "stablehlo.if"(%p) ({ %r54 = "stablehlo.if"(%p) ({ %r53 = "stablehlo.if"(%p) ({ %r52 = "stablehlo.if"(%p) ({ %r51 = "stablehlo.if"(%p) ({ %r50 = "stablehlo.if"(%p) ({ %r49 = "stablehlo.if"(%p) ({ %r48 = "stablehlo.if"(%p) ({ %r47 = "stablehlo.if"(%p) ({ %r46 = "stablehlo.if"(%p) ({ %r45 = "stablehlo.if"(%p) ({ %r44 = "stablehlo.if"(%p) ({ %r43 = "stablehlo.if"(%p) ({ %r42 = "stablehlo.if"(%p) ({ %r41 = "stablehlo.if"(%p) ({ %r40 = "stablehlo.if"(%p) ({ %r39 = "stablehlo.if"(%p) ({ %r38 = "stablehlo.if"(%p) ({ %r37 = "stablehlo.if"(%p) ({ %r36 = "stablehlo.if"(%p) ({ %r35 = "stablehlo.if"(%p) ({ %r34 = "stablehlo.if"(%p) ({ %r33 = "stablehlo.if"(%p) ({ %r32 = "stablehlo.if"(%p) ({ %r31 = "stablehlo.if"(%p) ({ %r30 = "stablehlo.if"(%p) ({ %r29 = "stablehlo.if"(%p) ({ %r28 = "stablehlo.if"(%p) ({ %r27 = "stablehlo.if"(%p) ({ %r26 = "stablehlo.if"(%p) ({ %r25 = "stablehlo.if"(%p) ({ %r24 = "stablehlo.if"(%p) ({ %r23 = "stablehlo.if"(%p) ({ %r22 = "stablehlo.if"(%p) ({ %r21 = "stablehlo.if"(%p) ({ %r20 = "stablehlo.if"(%p) ({ %r19 = "stablehlo.if"(%p) ({ %r18 = "stablehlo.if"(%p) ({ %r17 = "stablehlo.if"(%p) ({ %r16 = "stablehlo.if"(%p) ({ %r15 = "stablehlo.if"(%p) ({ %r14 = "stablehlo.if"(%p) ({ %r13 = "stablehlo.if"(%p) ({ %r12 = "stablehlo.if"(%p) ({ %r11 = "stablehlo.if"(%p) ({ %r10 = "stablehlo.if"(%p) ({ %r9 = "stablehlo.if"(%p) ({ %r8 = "stablehlo.if"(%p) ({ %r7 = "stablehlo.if"(%p) ({ %r6 = "stablehlo.if"(%p) ({ %r5 = "stablehlo.if"(%p) ({ %r4 = "stablehlo.if"(%p) ({ %r3 = "stablehlo.if"(%p) ({ %r2 = "stablehlo.if"(%p) ({ %r1 = "stablehlo.if"(%p) ({ %r0 = "stablehlo.if"(%p) ({ stablehlo.return %c : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r0 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r1 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r2 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r3 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r4 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r5 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r6 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r7 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r8 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r9 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r10 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r11 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r12 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r13 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r14 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r15 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r16 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r17 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r18 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r19 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r20 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r21 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r22 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r23 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r24 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r25 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r26 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r27 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r28 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r29 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r30 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r31 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r32 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r33 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r34 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r35 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r36 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r37 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r38 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r39 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r40 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r41 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r42 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r43 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r44 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r45 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r46 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r47 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r48 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r49 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r50 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r51 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r52 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r53 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r54 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r55 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r56 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r57 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r58 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r59 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r60 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r61 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r62 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r63 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r64 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r65 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r66 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r67 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 stablehlo.return %r68 : tensor<f32> }, { stablehlo.return %c : tensor<f32> }) : (tensor<i1>) -> tensor<f32>
 return %r69 : tensor<f32>
 }
}
