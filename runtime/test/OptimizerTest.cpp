//===- OptimizerTest.cpp - Optimizer updates, clipping and LR schedule ----===//
//
// The reference below follows torch.optim's single-tensor SGD / Adam / AdamW
// code line by line (buffers created on the first step, lerp for the first
// moment), with the runtime's storage: f32 state (f64 for f64 parameters
// from ABI 18 on), parameters rounded to their dtype after every step.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

using namespace tt;

namespace {

using OptimizerTest = RuntimeTest;
using Vec = std::vector<double>;

constexpr auto sgd = sgdOptimizer;

tessel_optimizer adam(int32_t kind, double wd) {
  return adamOptimizer(kind, 0.9, 0.999, 1e-8, wd);
}

/// PyTorch's update of one tensor in compute type C, its state stored in S.
template <class C, class S = float> struct Reference {
  tessel_optimizer o;
  int32_t dtype;
  std::vector<S> buf, expAvg, expAvgSq;
  bool hasState = false;

  void step(Vec &param, const Vec &grad, double gradScale, int64_t t,
            double lr) {
    size_t n = param.size();
    if (!hasState) {
      buf.assign(n, S(0));
      expAvg.assign(n, S(0));
      expAvgSq.assign(n, S(0));
    }
    for (size_t i = 0; i < n; ++i) {
      C p = C(param[i]);
      C g = C(grad[i]) * C(S(gradScale));
      if (o.kind == TESSEL_OPT_SGD) {
        if (o.weight_decay != 0)
          g = g + C(o.weight_decay) * p;
        if (o.momentum != 0) {
          if (!hasState)
            buf[i] = S(g); // torch.clone(d_p)
          else
            buf[i] = S(C(buf[i]) * C(o.momentum) + g); // dampening 0
          g = o.nesterov ? g + C(o.momentum) * C(buf[i]) : C(buf[i]);
        }
        p = p - C(lr) * g;
      } else {
        if (o.kind == TESSEL_OPT_ADAMW)
          p = p * C(1 - lr * o.weight_decay);
        else if (o.weight_decay != 0)
          g = g + C(o.weight_decay) * p;
        C m = C(expAvg[i]);
        expAvg[i] = S(m + C(1 - o.beta1) * (g - m));
        expAvgSq[i] = S(C(expAvgSq[i]) * C(o.beta2) + C(1 - o.beta2) * g * g);
        double bc1 = 1 - std::pow(o.beta1, double(t));
        double bc2 = 1 - std::pow(o.beta2, double(t));
        C stepSize = C(lr / bc1);
        C denom = std::sqrt(C(expAvgSq[i])) / C(std::sqrt(bc2)) + C(o.eps);
        p = p - stepSize * (C(expAvg[i]) / denom);
      }
      param[i] = quantize(dtype, double(p));
    }
    hasState = true;
  }
};

struct Run {
  Vec param;
  std::vector<float> s0, s1;
};

/// `steps` updates through the runtime and the reference; compares after
/// steps 1, 2 and 10 (and the last).
template <class C>
void compareSteps(tessel_ctx *ctx, const tessel_optimizer &o, int32_t dtype,
                  bool useScale, int steps, double rtol, double atol) {
  const size_t n = 13;
  Vec p0 = randomValues(dtype, n, -1, 1, 900);
  Reference<C> ref{o, dtype, {}, {}, {}};
  Vec refParam = p0;
  std::vector<uint8_t> param = encode(dtype, p0);
  std::vector<float> s0(n, 0.f), s1(n, 0.f);
  for (int t = 1; t <= steps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    Vec g = randomValues(dtype, n, -2, 2, 901 + t);
    if (t == 3)
      g[0] = 0; // A zero gradient after nonzero moments.
    float scale = 0.5f + 0.125f * float(t);
    double lr = 1e-2 * (1.0 + 0.1 * t);
    std::vector<uint8_t> gb = encode(dtype, g);
    tessel_optimizer_update(ctx, &o, dtype, param.data(), gb.data(),
                            useScale ? &scale : nullptr, s0.data(), s1.data(),
                            int64_t(n), t, lr);
    ref.step(refParam, g, useScale ? scale : 1.0, t, lr);
    if (t == 1 || t == 2 || t == 10 || t == steps) {
      expectClose(decode(dtype, param), refParam, rtol, atol);
      if (o.kind == TESSEL_OPT_SGD) {
        if (o.momentum != 0)
          expectClose(Vec(s0.begin(), s0.end()),
                      Vec(ref.buf.begin(), ref.buf.end()), 1e-6, 1e-7);
      } else {
        expectClose(Vec(s0.begin(), s0.end()),
                    Vec(ref.expAvg.begin(), ref.expAvg.end()), 1e-6, 1e-7);
        expectClose(Vec(s1.begin(), s1.end()),
                    Vec(ref.expAvgSq.begin(), ref.expAvgSq.end()), 1e-6, 1e-9);
      }
    }
  }
}

TEST_F(OptimizerTest, MatchesPyTorchReference) {
  struct Config {
    const char *name;
    tessel_optimizer o;
  };
  const Config configs[] = {
      {"sgd", sgd(0, 0, 0)},
      {"sgd wd", sgd(0, 0, 0.1)},
      {"momentum", sgd(0.9, 0, 0)},
      {"momentum wd", sgd(0.9, 0, 0.05)},
      {"nesterov", sgd(0.9, 1, 0)},
      {"nesterov wd", sgd(0.8, 1, 0.05)},
      {"adam", adam(TESSEL_OPT_ADAM, 0)},
      {"adam l2", adam(TESSEL_OPT_ADAM, 0.1)},
      {"adamw", adam(TESSEL_OPT_ADAMW, 0.1)},
      {"adamw no decay", adam(TESSEL_OPT_ADAMW, 0)},
  };
  for (const Config &c : configs) {
    for (bool useScale : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (useScale ? " scaled" : ""));
      {
        SCOPED_TRACE("f64");
        compareSteps<double>(ctx, c.o, TESSEL_F64, useScale, 10, 1e-9, 1e-9);
      }
      {
        SCOPED_TRACE("f32");
        compareSteps<float>(ctx, c.o, TESSEL_F32, useScale, 10, 1e-6, 1e-6);
      }
      {
        // Parameters are rounded every step: an occasional tie broken the
        // other way is one ulp.
        SCOPED_TRACE("bf16");
        compareSteps<float>(ctx, c.o, TESSEL_BF16, useScale, 10,
                            eps(TESSEL_BF16), 1e-6);
      }
    }
  }
}

// Tests ABI 18's f64 update: with f64 states and scale an f64 parameter
// follows PyTorch's f64 arithmetic to the last bits, where the f32 states
// of tessel_optimizer_update round every step's moments (measured: 1e-9
// relative after 10 steps).
TEST_F(OptimizerTest, F64StatesMatchPyTorchInF64) {
  const tessel_optimizer configs[] = {sgd(0.9, 0, 0.05), sgd(0.8, 1, 0),
                                      adam(TESSEL_OPT_ADAM, 0.1),
                                      adam(TESSEL_OPT_ADAMW, 0.1)};
  const size_t n = 13;
  const double lr = 1e-2;
  tessel_lr_schedule schedule{TESSEL_LR_CONSTANT, lr, 0, 0, 0};
  for (const tessel_optimizer &o : configs) {
    SCOPED_TRACE("kind " + std::to_string(o.kind));
    Vec p0 = randomValues(TESSEL_F64, n, -1, 1, 960);
    Reference<double, double> wide{o, TESSEL_F64, {}, {}, {}};
    Reference<double, float> narrow{o, TESSEL_F64, {}, {}, {}};
    Vec wideParam = p0, narrowParam = p0, param = p0;
    std::vector<double> s0(n, 0.0), s1(n, 0.0);
    bool momentumOnly = o.kind == TESSEL_OPT_SGD;
    for (int t = 1; t <= 10; ++t) {
      Vec g = randomValues(TESSEL_F64, n, -2, 2, 961 + t);
      double scale = 1.0 / 3.0; // not an f32
      void *pointers[] = {param.data(), g.data(), s0.data(),
                          momentumOnly ? nullptr : s1.data()};
      int64_t counts[] = {int64_t(n)};
      tessel_set_step(ctx, uint64_t(t - 1));
      tessel_optimizer_update_f64_group_current(ctx, &o, &schedule, &scale, 1,
                                                pointers, counts);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      wide.step(wideParam, g, scale, t, lr);
      narrow.step(narrowParam, g, scale, t, lr);
    }
    expectClose(param, wideParam, 1e-15, 1e-15);
    expectClose(s0, momentumOnly ? wide.buf : wide.expAvg, 1e-15, 1e-15);
    if (!momentumOnly)
      expectClose(s1, wide.expAvgSq, 1e-15, 1e-15);
    double apart = 0;
    for (size_t i = 0; i < n; ++i)
      apart = std::max(apart, std::fabs(narrowParam[i] - wideParam[i]));
    EXPECT_GT(apart, 1e-12) << "f32 states should round the update";
  }
}

// Tests the f64 group's checks: every tensor before any update, a null
// schedule, a bad count.
TEST_F(OptimizerTest, F64GroupChecksEveryTensorFirst) {
  tessel_optimizer o = adam(TESSEL_OPT_ADAMW, 0.1);
  tessel_lr_schedule schedule{TESSEL_LR_CONSTANT, 0.1, 0, 0, 0};
  double p0 = 1, g0 = 1, m0 = 0, v0 = 0, p1 = 1, g1 = 1, m1 = 0;
  void *pointers[] = {&p0, &g0, &m0, &v0, &p1, &g1, &m1, nullptr};
  int64_t counts[] = {1, 1};
  tessel_optimizer_update_f64_group_current(ctx, &o, &schedule, nullptr, 2,
                                            pointers, counts);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_EQ(std::string(tessel_error(ctx)),
            "tessel_optimizer_update_f64_group_current: missing optimizer "
            "state");
  tessel_clear_error(ctx);
  EXPECT_EQ(p0, 1.0);
  tessel_optimizer_update_f64_group_current(ctx, &o, nullptr, nullptr, 1,
                                            pointers, counts);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_EQ(std::string(tessel_error(ctx)),
            "tessel_optimizer_update_f64_group_current: null learning-rate "
            "schedule");
  tessel_clear_error(ctx);
  tessel_optimizer_update_f64_group_current(ctx, &o, &schedule, nullptr, -1,
                                            pointers, counts);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("bad tensor count -1"),
            std::string::npos);
  tessel_clear_error(ctx);
  EXPECT_EQ(p0, 1.0);
}

TEST_F(OptimizerTest, SgdSingleUpdate) {
  double p[3] = {1.0, -2.0, 0.5}, g[3] = {0.5, 0.25, -1.0};
  tessel_optimizer o = sgd(0, 0, 0);
  tessel_optimizer_update(ctx, &o, TESSEL_F64, p, g, nullptr, nullptr, nullptr,
                          3, 1, 0.1);
  EXPECT_DOUBLE_EQ(p[0], 0.95);
  EXPECT_DOUBLE_EQ(p[1], -2.025);
  EXPECT_DOUBLE_EQ(p[2], 0.6);
}

TEST_F(OptimizerTest, AdamFirstStepIsSignedLearningRate) {
  // After bias correction m̂ = g and v̂ = g², so step 1 moves every
  // parameter by lr·g / (|g| + eps).
  for (int32_t kind : {TESSEL_OPT_ADAM, TESSEL_OPT_ADAMW}) {
    double p[4] = {1, 1, 1, 1}, g[4] = {3.0, -0.5, 1e-3, -20};
    float m[4] = {0}, v[4] = {0};
    tessel_optimizer o = adam(kind, 0);
    tessel_optimizer_update(ctx, &o, TESSEL_F64, p, g, nullptr, m, v, 4, 1,
                            0.01);
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(p[i], 1 - 0.01 * g[i] / (std::fabs(g[i]) + 1e-8), 1e-8)
          << i;
  }
}

TEST_F(OptimizerTest, AdamWDecaysBeforeTheStep) {
  // Zero gradient: the Adam step is 0, only the decoupled decay acts.
  double p[2] = {2.0, -4.0}, g[2] = {0, 0};
  float m[2] = {0}, v[2] = {0};
  tessel_optimizer o = adam(TESSEL_OPT_ADAMW, 0.5);
  tessel_optimizer_update(ctx, &o, TESSEL_F64, p, g, nullptr, m, v, 2, 1, 0.1);
  EXPECT_DOUBLE_EQ(p[0], 2.0 * 0.95);
  EXPECT_DOUBLE_EQ(p[1], -4.0 * 0.95);
}

TEST_F(OptimizerTest, BadArgumentsSetError) {
  float p = 1, g = 1, m = 0, v = 0;
  tessel_optimizer o = adam(TESSEL_OPT_ADAM, 0);
  tessel_optimizer_update(ctx, &o, TESSEL_F32, &p, &g, nullptr, &m, &v, 1, 0,
                          0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  EXPECT_EQ(p, 1.0f);
  tessel_clear_error(ctx);
  tessel_optimizer_update(ctx, &o, TESSEL_F32, &p, &g, nullptr, &m, nullptr, 1,
                          1, 0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  tessel_optimizer s = sgd(0.9, 0, 0);
  tessel_optimizer_update(ctx, &s, TESSEL_F32, &p, &g, nullptr, nullptr,
                          nullptr, 1, 1, 0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  o.kind = 7;
  tessel_optimizer_update(ctx, &o, TESSEL_F32, &p, &g, nullptr, &m, &v, 1, 1,
                          0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  int32_t ip = 1, ig = 1;
  o.kind = TESSEL_OPT_SGD;
  tessel_optimizer_update(ctx, &o, TESSEL_I32, &ip, &ig, nullptr, nullptr,
                          nullptr, 1, 1, 0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

//===--- Mixed precision: the f32 master weights ----------------------------===//

// tessel_optimizer_update_master is tessel_optimizer_update on the f32
// master with the gradient widened, plus the rounded copy: checked bit for
// bit against that call over 10 steps, for every optimizer, every copy
// dtype and every gradient dtype.
TEST_F(OptimizerTest, MasterUpdateIsTheF32UpdateAndItsRoundedCopy) {
  const tessel_optimizer configs[] = {sgd(0, 0, 0.1), sgd(0.9, 1, 0.05),
                                      adam(TESSEL_OPT_ADAM, 0.1),
                                      adam(TESSEL_OPT_ADAMW, 0.1)};
  const size_t n = 37; // a vector body and a scalar tail
  for (const tessel_optimizer &o : configs)
    for (int32_t copyDtype : {TESSEL_BF16, TESSEL_F16})
      for (int32_t gradDtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F16}) {
        SCOPED_TRACE("kind " + std::to_string(o.kind) + " copy " +
                     std::to_string(copyDtype) + " grad " +
                     std::to_string(gradDtype));
        Vec init = randomValues(TESSEL_F32, n, -1, 1, 700);
        std::vector<uint8_t> master = encode(TESSEL_F32, init);
        std::vector<uint8_t> expected = master;
        std::vector<uint8_t> copy = encode(copyDtype, init);
        std::vector<float> s0(n, 0.f), s1(n, 0.f), e0(n, 0.f), e1(n, 0.f);
        for (int t = 1; t <= 10; ++t) {
          Vec g = randomValues(gradDtype, n, -2, 2, 710 + t);
          std::vector<uint8_t> grad = encode(gradDtype, g);
          // The widening is exact, so the f32 call sees the same values.
          std::vector<uint8_t> wide = encode(TESSEL_F32, decode(gradDtype, grad));
          float scale = 0.75f;
          tessel_optimizer_update_master(ctx, &o, copyDtype, copy.data(),
                                         master.data(), gradDtype, grad.data(),
                                         &scale, s0.data(), s1.data(),
                                         int64_t(n), t, 1e-2);
          tessel_optimizer_update(ctx, &o, TESSEL_F32, expected.data(),
                                  wide.data(), &scale, e0.data(), e1.data(),
                                  int64_t(n), t, 1e-2);
          ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
          ASSERT_EQ(master, expected) << "step " << t;
          ASSERT_EQ(s0, e0) << "step " << t;
          ASSERT_EQ(s1, e1) << "step " << t;
          ASSERT_EQ(copy, encode(copyDtype, decode(TESSEL_F32, master)))
              << "step " << t;
        }
      }
}

TEST_F(OptimizerTest, MasterUpdateRefusesBadDtypesAndMissingMaster) {
  float master = 1, g = 1, m = 0, v = 0;
  uint16_t copy = 0x3f80; // bf16 1.0
  tessel_optimizer o = adam(TESSEL_OPT_ADAMW, 0);
  // An f32 "copy" (use tessel_optimizer_update), an f64 gradient, no master.
  tessel_optimizer_update_master(ctx, &o, TESSEL_F32, &copy, &master,
                                 TESSEL_F32, &g, nullptr, &m, &v, 1, 1, 0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  double g64 = 1;
  tessel_optimizer_update_master(ctx, &o, TESSEL_BF16, &copy, &master,
                                 TESSEL_F64, &g64, nullptr, &m, &v, 1, 1, 0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  tessel_optimizer_update_master(ctx, &o, TESSEL_BF16, &copy, nullptr,
                                 TESSEL_F32, &g, nullptr, &m, &v, 1, 1, 0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  tessel_optimizer_update_master(ctx, &o, TESSEL_BF16, &copy, &master,
                                 TESSEL_F32, &g, nullptr, &m, &v, 1, 0, 0.1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  EXPECT_EQ(master, 1.0f);
  EXPECT_EQ(copy, 0x3f80);
}

// Tests that the _current entries update with the context's step + 1 and
// the schedule's rate there, bit for bit as the explicit entries given the
// same count and rate, over a warm-up and cosine schedule, for every
// optimizer and the mixed-precision form.
TEST_F(OptimizerTest, CurrentUpdateUsesTheContextsStepAndSchedule) {
  const tessel_optimizer configs[] = {sgd(0.9, 0, 0.1), sgd(0, 0, 0),
                                      adam(TESSEL_OPT_ADAM, 0.1),
                                      adam(TESSEL_OPT_ADAMW, 0.1)};
  tessel_lr_schedule schedule{TESSEL_LR_WARMUP_COSINE, 1e-2, 1e-3, 3, 8};
  const size_t n = 21;
  for (const tessel_optimizer &o : configs) {
    SCOPED_TRACE("kind " + std::to_string(o.kind));
    Vec init = randomValues(TESSEL_F32, n, -1, 1, 800);
    std::vector<uint8_t> p = encode(TESSEL_F32, init), want = p;
    std::vector<uint8_t> master = p, wantMaster = p;
    std::vector<uint8_t> copy = encode(TESSEL_BF16, init), wantCopy = copy;
    std::vector<float> s0(n), s1(n), e0(n), e1(n);
    std::vector<float> m0(n), m1(n), f0(n), f1(n);
    for (int64_t step = 0; step < 10; ++step) {
      std::vector<uint8_t> g =
          encode(TESSEL_F32, randomValues(TESSEL_F32, n, -2, 2, 810 + step));
      float scale = 0.5f;
      double lr = tessel_lr_at(schedule.kind, schedule.lr, schedule.min_lr,
                               schedule.warmup, schedule.total_steps, step + 1);
      tessel_set_step(ctx, uint64_t(step));
      tessel_optimizer_update_current(ctx, &o, &schedule, TESSEL_F32, p.data(),
                                      g.data(), &scale, s0.data(), s1.data(),
                                      int64_t(n));
      tessel_optimizer_update(ctx, &o, TESSEL_F32, want.data(), g.data(),
                              &scale, e0.data(), e1.data(), int64_t(n),
                              step + 1, lr);
      tessel_optimizer_update_master_current(
          ctx, &o, &schedule, TESSEL_BF16, copy.data(), master.data(),
          TESSEL_F32, g.data(), &scale, m0.data(), m1.data(), int64_t(n));
      tessel_optimizer_update_master(ctx, &o, TESSEL_BF16, wantCopy.data(),
                                     wantMaster.data(), TESSEL_F32, g.data(),
                                     &scale, f0.data(), f1.data(), int64_t(n),
                                     step + 1, lr);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      ASSERT_EQ(p, want) << "step " << step;
      ASSERT_EQ(s0, e0) << "step " << step;
      ASSERT_EQ(s1, e1) << "step " << step;
      ASSERT_EQ(master, wantMaster) << "step " << step;
      ASSERT_EQ(copy, wantCopy) << "step " << step;
    }
  }
}

TEST_F(OptimizerTest, CurrentUpdateRefusesAMissingOrUnknownSchedule) {
  float p = 1, g = 1, m = 0, v = 0;
  tessel_optimizer o = adam(TESSEL_OPT_ADAMW, 0);
  tessel_optimizer_update_current(ctx, &o, nullptr, TESSEL_F32, &p, &g,
                                  nullptr, &m, &v, 1);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("null learning-rate schedule"),
            std::string::npos)
      << tessel_error(ctx);
  tessel_clear_error(ctx);
  tessel_lr_schedule unknown{7, 0.1, 0, 0, 0};
  tessel_optimizer_update_current(ctx, &o, &unknown, TESSEL_F32, &p, &g,
                                  nullptr, &m, &v, 1);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("unknown learning-rate schedule 7"),
            std::string::npos)
      << tessel_error(ctx);
  tessel_clear_error(ctx);
  EXPECT_EQ(p, 1.0f);
}

// Tests that a grouped update equals the single calls, tensor by tensor and
// bit for bit: plain f32 (SGD with momentum, AdamW) and master weights
// with bf16 copies and bf16 gradients, over tensors of several sizes (an
// empty one included).
TEST_F(OptimizerTest, GroupUpdateEqualsTheCallsOneByOne) {
  const tessel_optimizer configs[] = {sgd(0.9, 1, 0.01),
                                      adam(TESSEL_OPT_ADAMW, 0.1)};
  tessel_lr_schedule schedule{TESSEL_LR_WARMUP_COSINE, 1e-2, 1e-3, 2, 6};
  const std::vector<size_t> sizes = {7, 0, 33};
  for (const tessel_optimizer &o : configs)
    for (bool master : {false, true}) {
      SCOPED_TRACE("kind " + std::to_string(o.kind) +
                   (master ? " master" : ""));
      const int32_t paramDtype = master ? TESSEL_BF16 : TESSEL_F32;
      const int32_t gradDtype = master ? TESSEL_BF16 : TESSEL_F32;
      struct Tensors {
        std::vector<uint8_t> param, master, grad;
        std::vector<float> s0, s1;
      };
      std::vector<Tensors> group, single;
      for (size_t t = 0; t < sizes.size(); ++t) {
        Vec init = randomValues(TESSEL_F32, sizes[t], -1, 1, 900 + int(t));
        Tensors x{encode(paramDtype, init), encode(TESSEL_F32, init), {},
                  std::vector<float>(sizes[t]), std::vector<float>(sizes[t])};
        group.push_back(x);
        single.push_back(x);
      }
      float scale = 0.25f;
      for (int64_t step = 0; step < 4; ++step) {
        std::vector<void *> pointers;
        std::vector<int64_t> counts;
        tessel_set_step(ctx, uint64_t(step));
        for (size_t t = 0; t < sizes.size(); ++t) {
          std::vector<uint8_t> g = encode(
              gradDtype,
              randomValues(gradDtype, sizes[t], -2, 2, 950 + int(10 * step + t)));
          group[t].grad = single[t].grad = g;
          Tensors &x = group[t];
          pointers.insert(pointers.end(),
                          {x.param.data(), master ? x.master.data() : nullptr,
                           x.grad.data(), x.s0.data(), x.s1.data()});
          counts.push_back(int64_t(sizes[t]));
          Tensors &y = single[t];
          if (master)
            tessel_optimizer_update_master_current(
                ctx, &o, &schedule, paramDtype, y.param.data(), y.master.data(),
                gradDtype, y.grad.data(), &scale, y.s0.data(), y.s1.data(),
                int64_t(sizes[t]));
          else
            tessel_optimizer_update_current(
                ctx, &o, &schedule, paramDtype, y.param.data(), y.grad.data(),
                &scale, y.s0.data(), y.s1.data(), int64_t(sizes[t]));
        }
        tessel_optimizer_update_group_current(
            ctx, &o, &schedule, paramDtype, gradDtype, master ? 1 : 0, &scale,
            int64_t(sizes.size()), pointers.data(), counts.data());
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        for (size_t t = 0; t < sizes.size(); ++t) {
          ASSERT_EQ(group[t].param, single[t].param) << "tensor " << t;
          ASSERT_EQ(group[t].master, single[t].master) << "tensor " << t;
          ASSERT_EQ(group[t].s0, single[t].s0) << "tensor " << t;
          ASSERT_EQ(group[t].s1, single[t].s1) << "tensor " << t;
        }
      }
    }
}

// Tests that a grouped update checks every tensor before it updates any:
// a missing state in the second tensor leaves the first one as it was.
TEST_F(OptimizerTest, GroupUpdateChecksEveryTensorFirst) {
  tessel_optimizer o = adam(TESSEL_OPT_ADAMW, 0.1);
  tessel_lr_schedule schedule{TESSEL_LR_CONSTANT, 0.1, 0, 0, 0};
  float p0 = 1, g0 = 1, m0 = 0, v0 = 0, p1 = 1, g1 = 1, m1 = 0;
  void *pointers[] = {&p0, nullptr, &g0, &m0, &v0,
                      &p1, nullptr, &g1, &m1, nullptr};
  int64_t counts[] = {1, 1};
  tessel_optimizer_update_group_current(ctx, &o, &schedule, TESSEL_F32,
                                        TESSEL_F32, 0, nullptr, 2, pointers,
                                        counts);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_EQ(std::string(tessel_error(ctx)),
            "tessel_optimizer_update_group_current: missing optimizer state");
  tessel_clear_error(ctx);
  EXPECT_EQ(p0, 1.0f);
  tessel_optimizer_update_group_current(ctx, &o, &schedule, TESSEL_F32,
                                        TESSEL_F32, 0, nullptr, -1, pointers,
                                        counts);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("bad tensor count -1"),
            std::string::npos);
  tessel_clear_error(ctx);
}

//===--- Gradient norm and clipping ---------------------------------------===//

TEST_F(OptimizerTest, SumSquaresAccumulates) {
  float sum = 1.5f;
  double ref = 1.5;
  int seed = 950;
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64, TESSEL_F16}) {
    for (int64_t n : {1, 7, 13}) {
      Vec x = randomValues(dtype, size_t(n), -3, 3, uint64_t(seed++));
      auto xb = encode(dtype, x);
      tessel_sum_squares(ctx, dtype, xb.data(), n, &sum);
      for (double v : x)
        ref += v * v;
      EXPECT_NEAR(sum, ref, 1e-6 * ref) << dtypeName(dtype) << " n " << n;
    }
  }
  tessel_sum_squares(ctx, TESSEL_F32, nullptr, 0, &sum);
  EXPECT_NEAR(sum, ref, 1e-6 * ref);
}

// Tests that the f64 sum of squares adds the f64 accumulation without
// rounding it to f32.
TEST_F(OptimizerTest, SumSquaresF64IsNotRounded) {
  double sum = 0.1; // not an f32
  double ref = 0.1;
  for (int32_t dtype : {TESSEL_F64, TESSEL_F32, TESSEL_BF16}) {
    Vec x = randomValues(dtype, 7, -3, 3, 970);
    auto xb = encode(dtype, x);
    tessel_sum_squares_f64(ctx, dtype, xb.data(), 7, &sum);
    for (double v : x)
      ref += v * v;
    EXPECT_NEAR(sum, ref, 1e-15 * ref) << dtypeName(dtype);
  }
  EXPECT_NE(double(float(sum)), sum);
  tessel_sum_squares_f64(ctx, TESSEL_I32, nullptr, 0, &sum);
  ASSERT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

// Tests the f64 clipping factor: the same formula, nothing rounded to f32.
TEST_F(OptimizerTest, ClipScaleF64) {
  double ss = 16.0, scale = 0, third = 1.0 / 3.0;
  tessel_clip_scale_f64(ctx, &ss, 1.0, &third, &scale);
  EXPECT_EQ(scale, 1.0 / (4.0 * third + 1e-6) * third);
  tessel_clip_scale_f64(ctx, &ss, 10.0, &third, &scale); // Below max_norm.
  EXPECT_EQ(scale, third);
  tessel_clip_scale_f64(ctx, &ss, 0.0, nullptr, &scale); // No clipping.
  EXPECT_EQ(scale, 1.0);
}

TEST_F(OptimizerTest, ClipScale) {
  float ss = 16.0f, scale = 0; // Norm 4.
  tessel_clip_scale(ctx, &ss, 1.0, nullptr, &scale);
  EXPECT_FLOAT_EQ(scale, float(1.0 / (4.0 + 1e-6)));
  float one = 1.0f;
  tessel_clip_scale(ctx, &ss, 1.0, &one, &scale); // Null means 1.
  EXPECT_FLOAT_EQ(scale, float(1.0 / (4.0 + 1e-6)));
  float half = 0.5f;
  tessel_clip_scale(ctx, &ss, 10.0, &half, &scale); // Below max_norm.
  EXPECT_EQ(scale, 0.5f);
  tessel_clip_scale(ctx, &ss, 0.0, &half, &scale); // No clipping.
  EXPECT_EQ(scale, 0.5f);
  tessel_clip_scale(ctx, &ss, -1.0, nullptr, &scale);
  EXPECT_EQ(scale, 1.0f);
  float zero = 0.0f;
  tessel_clip_scale(ctx, &zero, 1.0, nullptr, &scale);
  EXPECT_EQ(scale, 1.0f);
}

// Clipping sees the norm of the scaled gradient g·grad, as
// clip_grad_norm_ after loss / M: ss is Σ of the unscaled gradients.
TEST_F(OptimizerTest, ClipScaleWithGradScale) {
  float ss = 16.0f, scale = 0, quarter = 0.25f; // Scaled norm 4 · 0.25 = 1.
  tessel_clip_scale(ctx, &ss, 2.0, &quarter, &scale); // 1 < 2: no clipping.
  EXPECT_EQ(scale, 0.25f);
  tessel_clip_scale(ctx, &ss, 0.5, &quarter, &scale); // Clipped to norm 0.5.
  EXPECT_FLOAT_EQ(scale, float(0.5 / (1.0 + 1e-6) * 0.25));
  // Scaling the gradients by g·coef gives the clipped norm (up to 1e-6).
  EXPECT_NEAR(std::sqrt(16.0) * scale, 0.5, 1e-6);
  // The same as clipping gradients that were scaled beforehand.
  float scaledSs = 1.0f, direct = 0;
  tessel_clip_scale(ctx, &scaledSs, 0.5, nullptr, &direct);
  EXPECT_FLOAT_EQ(scale, direct * 0.25f);
}

TEST_F(OptimizerTest, KernelsCount) {
  float p = 1, g = 1, m = 0, v = 0, ss = 0, sc = 0;
  tessel_optimizer o = adam(TESSEL_OPT_ADAM, 0);
  tessel_reset_counters(ctx);
  tessel_sum_squares(ctx, TESSEL_F32, &g, 1, &ss);
  tessel_clip_scale(ctx, &ss, 1.0, nullptr, &sc);
  tessel_optimizer_update(ctx, &o, TESSEL_F32, &p, &g, &sc, &m, &v, 1, 1, 0.1);
  tessel_counters c;
  tessel_get_counters(ctx, &c);
  EXPECT_EQ(c.kernel_calls, 3);
}

//===--- Learning-rate schedule -------------------------------------------===//

TEST_F(OptimizerTest, LearningRateSchedule) {
  const double lr = 1e-3, minLr = 1e-4;
  auto at = [&](int64_t step) {
    return tessel_lr_at(TESSEL_LR_WARMUP_COSINE, lr, minLr, 10, 110, step);
  };
  EXPECT_DOUBLE_EQ(at(1), 1e-4);  // Warm-up start.
  EXPECT_DOUBLE_EQ(at(5), 5e-4);  // Warm-up middle.
  EXPECT_DOUBLE_EQ(at(10), lr);   // Warm-up end.
  EXPECT_LT(at(11), lr);
  EXPECT_GT(at(11), at(12));
  EXPECT_DOUBLE_EQ(at(60), (lr + minLr) / 2); // Cosine midpoint.
  EXPECT_NEAR(at(35), minLr + (lr - minLr) * (0.5 + 0.5 * std::cos(M_PI / 4)),
              1e-15);
  EXPECT_DOUBLE_EQ(at(110), minLr); // End.
  EXPECT_DOUBLE_EQ(at(500), minLr); // After the end.
  // No warm-up: the cosine starts at lr.
  EXPECT_DOUBLE_EQ(
      tessel_lr_at(TESSEL_LR_WARMUP_COSINE, lr, minLr, 0, 100, 0), lr);
  EXPECT_DOUBLE_EQ(
      tessel_lr_at(TESSEL_LR_WARMUP_COSINE, lr, minLr, 0, 100, 50),
      (lr + minLr) / 2);
  // Constant: the same linear warm-up, then lr for ever.
  EXPECT_DOUBLE_EQ(tessel_lr_at(TESSEL_LR_CONSTANT, lr, minLr, 10, 110, 1),
                   1e-4);
  EXPECT_DOUBLE_EQ(tessel_lr_at(TESSEL_LR_CONSTANT, lr, minLr, 10, 110, 5),
                   5e-4);
  for (int64_t step : {10, 11, 110, 1000})
    EXPECT_EQ(tessel_lr_at(TESSEL_LR_CONSTANT, lr, minLr, 10, 110, step), lr);
  for (int64_t step : {0, 1, 1000})
    EXPECT_EQ(tessel_lr_at(TESSEL_LR_CONSTANT, lr, minLr, 0, 0, step), lr);
  EXPECT_TRUE(std::isnan(tessel_lr_at(99, lr, minLr, 10, 110, 1)));
}

} // namespace
