// Tests the backward ops through the runtime, each reduced to a number known
// by hand (f32, exact unless noted):
//   relu_grad([-1, 0, 2], [5, 7, 11]) = [0, 0, 11]                      -> 11
//   gelu_grad(0, 2) = silu_grad(0, 2) = 2 · 0.5                         -> 1 + 1
//   softmax_grad(y = [1/4, 3/4], dy = [4, 8]) = [-3/4, 3/4]; · [1, 2]    -> 0.75
//   cross_entropy_grad of zero logits [2, 4], labels [1, 3], mean, dloss 1:
//     rows (1/2)(1/4 - onehot); · [[1, 2, 3, 4], [1, 2, 3, 4]]           -> -0.5
//   embedding_grad(ids [2, 0, 2], dout [[1, 2], [3, 4], [5, 6]]) into 4x2:
//     rows 0 = [3, 4], 2 = [6, 8]; picked [0][0] + [2][1]                 -> 11
//   slice_grad([1, 2], start 1, limit 5, stride 2) = [0, 1, 0, 2, 0]; · [1..5] -> 10
//   equal([1, 2, 3], [1, 5, 3]) = [1, 0, 1]                              -> 2
//   layer_norm_grad dbeta = Σ_rows dy = [1, 0]                           -> 1
//   batch_norm_grad dbeta = Σ dy over the batch                          -> 1
//   attention_grad with q = k = 0 (uniform probabilities over T = 2), from
//   the forward's output and log-sum-exp (log 2 per row):
//     dv = mean over the queries of dout [1, 3] at both keys = [2, 2]   -> 4
//   rms_norm_grad dgamma of x = [3, 4], dy = 1: x / sqrt(12.5) sums to  -> 1.979899
// loss = 44.229899 (rms epsilon 1e-6 moves the 7th digit).
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":44.2299{{[0-9]*}},

func.func @loss(%unused: tensor<1xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  // relu_grad, gelu_grad, silu_grad
  %rx = nn.constant dense<[-1.0, 0.0, 2.0]> : tensor<3xf32>
  %rdy = nn.constant dense<[5.0, 7.0, 11.0]> : tensor<3xf32>
  %r = nn.relu_grad %rx, %rdy : tensor<3xf32>
  %rs = nn.reduce_sum %r dims = [0] : tensor<3xf32> -> tensor<f32>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %two = nn.constant dense<2.0> : tensor<f32>
  %gg = nn.gelu_grad %zero, %two : tensor<f32>
  %sg = nn.silu_grad %zero, %two : tensor<f32>
  // softmax_grad
  %y = nn.constant dense<[0.25, 0.75]> : tensor<2xf32>
  %ydy = nn.constant dense<[4.0, 8.0]> : tensor<2xf32>
  %sm = nn.softmax_grad %y, %ydy : tensor<2xf32>
  %smw = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %smp = nn.mul %sm, %smw : tensor<2xf32>
  %sms = nn.reduce_sum %smp dims = [0] : tensor<2xf32> -> tensor<f32>
  // cross_entropy_grad
  %z = nn.constant dense<0.0> : tensor<2x4xf32>
  %labels = nn.constant dense<[1, 3]> : tensor<2xi32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %dz = nn.cross_entropy_grad %z, %labels, %one : (tensor<2x4xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x4xf32>
  %cew = nn.constant dense<[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]> : tensor<2x4xf32>
  %cep = nn.mul %dz, %cew : tensor<2x4xf32>
  %ces = nn.reduce_sum %cep dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  // embedding_grad
  %ids = nn.constant dense<[2, 0, 2]> : tensor<3xi32>
  %dout = nn.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %dtable = nn.embedding_grad %ids, %dout : (tensor<3xi32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %pick = nn.constant dense<[[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]> : tensor<4x2xf32>
  %ep = nn.mul %dtable, %pick : tensor<4x2xf32>
  %es = nn.reduce_sum %ep dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  // slice_grad
  %sdy = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %sx = nn.slice_grad %sdy start = [1] limit = [5] strides = [2] : tensor<2xf32> -> tensor<5xf32>
  %sw = nn.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<5xf32>
  %sp = nn.mul %sx, %sw : tensor<5xf32>
  %ss = nn.reduce_sum %sp dims = [0] : tensor<5xf32> -> tensor<f32>
  // equal
  %ea = nn.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %eb = nn.constant dense<[1.0, 5.0, 3.0]> : tensor<3xf32>
  %eq = nn.equal %ea, %eb : tensor<3xf32>
  %eqs = nn.reduce_sum %eq dims = [0] : tensor<3xf32> -> tensor<f32>
  // layer_norm_grad and batch_norm_grad: dbeta
  %nx = nn.constant dense<[[1.0, 3.0]]> : tensor<1x2xf32>
  %ng = nn.constant dense<1.0> : tensor<2xf32>
  %ndy = nn.constant dense<[[1.0, 0.0]]> : tensor<1x2xf32>
  %lx, %lg, %lb = nn.layer_norm_grad %nx, %ng, %ndy : (tensor<1x2xf32>, tensor<2xf32>, tensor<1x2xf32>) -> (tensor<1x2xf32>, tensor<2xf32>, tensor<2xf32>)
  %lbs = nn.reduce_sum %lb dims = [0] : tensor<2xf32> -> tensor<f32>
  %bx = nn.constant dense<[[1.0], [3.0]]> : tensor<2x1xf32>
  %bg = nn.constant dense<1.0> : tensor<1xf32>
  %bdy = nn.constant dense<[[1.0], [0.0]]> : tensor<2x1xf32>
  %bnx, %bng, %bnb = nn.batch_norm_grad %bx, %bg, %bdy : (tensor<2x1xf32>, tensor<1xf32>, tensor<2x1xf32>) -> (tensor<2x1xf32>, tensor<1xf32>, tensor<1xf32>)
  %bbs = nn.reduce_sum %bnb dims = [0] : tensor<1xf32> -> tensor<f32>
  // attention_grad: dv
  %qk = nn.constant dense<0.0> : tensor<1x2x1x1xf32>
  %v = nn.constant dense<[[[[5.0]], [[-7.0]]]]> : tensor<1x2x1x1xf32>
  %do = nn.constant dense<[[[[1.0]], [[3.0]]]]> : tensor<1x2x1x1xf32>
  %ao, %alse = nn.attention %qk, %qk, %v lse : (tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>) -> (tensor<1x2x1x1xf32>, tensor<1x1x2xf32>)
  %dq, %dk, %dv = nn.attention_grad %qk, %qk, %v, %ao, %alse, %do : (tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x1x2xf32>, tensor<1x2x1x1xf32>) -> (tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>)
  %dvs = nn.reduce_sum %dv dims = [0, 1, 2, 3] : tensor<1x2x1x1xf32> -> tensor<f32>
  // rms_norm_grad: dgamma
  %mx = nn.constant dense<[[3.0, 4.0]]> : tensor<1x2xf32>
  %mdy = nn.constant dense<1.0> : tensor<1x2xf32>
  %mdx, %mdg = nn.rms_norm_grad %mx, %ng, %mdy : (tensor<1x2xf32>, tensor<2xf32>, tensor<1x2xf32>) -> (tensor<1x2xf32>, tensor<2xf32>)
  %mgs = nn.reduce_sum %mdg dims = [0] : tensor<2xf32> -> tensor<f32>
  // The sum.
  %a0 = nn.add %rs, %gg : tensor<f32>
  %a1 = nn.add %a0, %sg : tensor<f32>
  %a2 = nn.add %a1, %sms : tensor<f32>
  %a3 = nn.add %a2, %ces : tensor<f32>
  %a4 = nn.add %a3, %es : tensor<f32>
  %a5 = nn.add %a4, %ss : tensor<f32>
  %a6 = nn.add %a5, %eqs : tensor<f32>
  %a7 = nn.add %a6, %lbs : tensor<f32>
  %a8 = nn.add %a7, %bbs : tensor<f32>
  %a9 = nn.add %a8, %dvs : tensor<f32>
  %a10 = nn.add %a9, %mgs : tensor<f32>
  return %a10 : tensor<f32>
}
