// Tests the training ops through the runtime on one step (runtime step 0, so
// the optimizer's 1-based update count is 1), each reduced to a number known
// by hand (f32):
//   sum_squares([3, 4] f32, [1] bf16)                                    -> 26
//   clip_scale(ss = 25, grad_scale = 0.5, max_norm = 1):
//     min(1, 1 / (5 · 0.5 + 1e-6)) · 0.5                                 -> 0.19999992
//   sgd, lr 0.1: [1, 2] − 0.1 · 0.5 · [3, 4]                             -> 0.85 + 1.8
//   adam, lr 0.01, step 1 (bias-corrected m̂ / sqrt(v̂) = sign g):
//     [3, 5] − 0.01 · sign([3, −4]) = [2.99, 5.01]; · [1, 10]           -> 53.09
//   sgd momentum 0.9, warmup_cosine lr 0.2 over 2 warm-up steps (lr 0.1
//     at step 1): buffer = g = 1, param 2 − 0.1                         -> 1.9 + 1
//   accumulate [10, 20] into [7, 8]                                      -> 45
// loss = 129.84 (to f32 precision; Adam's eps moves the 9th digit). Equal
// constants would be merged by CSE and then updated in place twice, so every
// init here is a distinct value.
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":{{129\.8399[0-9]*|129\.840[0-9]*}},

func.func @loss(%unused: tensor<1xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  %g = nn.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %h = nn.constant dense<1.0> : tensor<1xbf16>
  %ss = nn.sum_squares %g, %h : (tensor<2xf32>, tensor<1xbf16>) -> tensor<f32>
  %ssg = nn.sum_squares %g : (tensor<2xf32>) -> tensor<f32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %clip = nn.clip_scale %ssg, %half {max_norm = 1.0 : f64} : tensor<f32>
  // sgd
  %p0 = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %p1 = nn.optimizer_step sgd %g, %half outs(%p0 : tensor<2xf32>) {lr = 0.1 : f64} : tensor<2xf32>
  %sgd = nn.reduce_sum %p1 dims = [0] : tensor<2xf32> -> tensor<f32>
  // adam
  %one = nn.constant dense<1.0> : tensor<f32>
  %ag = nn.constant dense<[3.0, -4.0]> : tensor<2xf32>
  %ap = nn.constant dense<[3.0, 5.0]> : tensor<2xf32>
  %am = nn.constant dense<0.0> : tensor<2xf32>
  %av = nn.sub %ag, %ag : tensor<2xf32>
  %ap1, %am1, %av1 = nn.optimizer_step adam %ag, %one outs(%ap, %am, %av : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {lr = 0.01 : f64} : tensor<2xf32>
  %aw = nn.constant dense<[1.0, 10.0]> : tensor<2xf32>
  %apw = nn.mul %ap1, %aw : tensor<2xf32>
  %adam = nn.reduce_sum %apw dims = [0] : tensor<2xf32> -> tensor<f32>
  // sgd with momentum and a warm-up
  %mg = nn.constant dense<1.0> : tensor<1xf32>
  %mp = nn.constant dense<2.0> : tensor<1xf32>
  %mb = nn.constant dense<0.0> : tensor<1xf32>
  %mp1, %mb1 = nn.optimizer_step sgd %mg, %one outs(%mp, %mb : tensor<1xf32>, tensor<1xf32>) {lr = 0.2 : f64, momentum = 0.9 : f64, schedule = #nn.lr_schedule<warmup_cosine>, warmup = 2 : i64, total_steps = 10 : i64} : tensor<1xf32>
  %mps = nn.reduce_sum %mp1 dims = [0] : tensor<1xf32> -> tensor<f32>
  %mbs = nn.reduce_sum %mb1 dims = [0] : tensor<1xf32> -> tensor<f32>
  // accumulate
  %acc = nn.constant dense<[7.0, 8.0]> : tensor<2xf32>
  %add = nn.constant dense<[10.0, 20.0]> : tensor<2xf32>
  %acc1 = nn.accumulate %add outs(%acc) : tensor<2xf32>
  %accs = nn.reduce_sum %acc1 dims = [0] : tensor<2xf32> -> tensor<f32>
  // The sum.
  %s0 = nn.add %ss, %clip : tensor<f32>
  %s1 = nn.add %s0, %sgd : tensor<f32>
  %s2 = nn.add %s1, %adam : tensor<f32>
  %s3 = nn.add %s2, %mps : tensor<f32>
  %s4 = nn.add %s3, %mbs : tensor<f32>
  %s5 = nn.add %s4, %accs : tensor<f32>
  return %s5 : tensor<f32>
}
