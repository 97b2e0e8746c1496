//===- MasterWeightsTest.cpp - bf16 parameters with f32 master copies -----===//
//
// ABI v4's "master_of": the description's rules and errors, the host's
// 16-bit conversions against the runtime's cast, and a fresh start where
// each master copy is its parameter's init in f32 and the parameter that
// rounded — on one device, as a ZeRO chunk and as a pipeline stage's rows.
// The checkpoints across precisions are MasterCheckpointTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/FloatFormats.h"
#include "runtime/launcher/Ranks.h"
#include "test/launcher/LibraryTestSupport.h"
#include "test/launcher/MasterWeightsSupport.h"

#include <cmath>
#include <functional>

using namespace tessel::run;
using namespace tessel::run::test;

namespace {

//===--- Host conversions -------------------------------------------------===//

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// `n` elements of `from` at host `src` cast by the runtime to `to`.
std::vector<char> runtimeCast(tessel_ctx *ctx, int32_t from, const void *src,
                              int32_t to, int64_t n) {
  int64_t inBytes = n * tessel_dtype_size(from);
  int64_t outBytes = n * tessel_dtype_size(to);
  void *in = tessel_alloc(ctx, inBytes), *out = tessel_alloc(ctx, outBytes);
  tessel_copy_to_device(ctx, in, src, inBytes);
  tessel_cast(ctx, from, to, in, out, n);
  std::vector<char> host(static_cast<size_t>(outBytes));
  tessel_copy_to_host(ctx, host.data(), out, outBytes);
  tessel_free(ctx, in);
  tessel_free(ctx, out);
  return host;
}

// Tests that the host's widening of every bf16 and f16 bit pattern, and its
// rounding of f32 values across the whole range (ties, subnormals,
// overflow, infinities, NaN), equal the runtime's tessel_cast bit for bit.
TEST(FloatFormats, MatchTheRuntimeCast) {
  RankRuntime rt(64);
  for (int32_t half : {TESSEL_BF16, TESSEL_F16}) {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i)
      all[i] = uint16_t(i);
    std::vector<char> wide =
        runtimeCast(rt.ctx, half, all.data(), TESSEL_F32, 65536);
    std::vector<float> mine(65536);
    convertFloats(half, all.data(), TESSEL_F32, mine.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      float theirs;
      std::memcpy(&theirs, wide.data() + 4 * i, 4);
      if (std::isnan(theirs))
        EXPECT_TRUE(std::isnan(mine[i])) << half << " " << i;
      else
        ASSERT_EQ(bitsOf(mine[i]), bitsOf(theirs)) << half << " bits " << i;
    }
  }
  // f32 patterns: a stride through all of them, plus every neighbour of the
  // boundaries where rounding changes form.
  std::vector<float> values;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521)
    values.push_back([&] {
      float f;
      uint32_t bits = uint32_t(u);
      std::memcpy(&f, &bits, 4);
      return f;
    }());
  for (uint32_t edge : {0x00000000u, 0x33000000u, 0x33800000u, 0x387fe000u,
                        0x38800000u, 0x3f808000u, 0x3f818000u, 0x477fe000u,
                        0x477ff000u, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u,
                        0x7fc00000u, 0x7f800001u})
    for (uint32_t sign : {0u, 0x80000000u})
      for (int delta = -2; delta <= 2; ++delta) {
        uint32_t bits = (edge + uint32_t(delta)) | sign;
        float f;
        std::memcpy(&f, &bits, 4);
        values.push_back(f);
      }
  int64_t n = int64_t(values.size());
  for (int32_t half : {TESSEL_BF16, TESSEL_F16}) {
    std::vector<char> theirs =
        runtimeCast(rt.ctx, TESSEL_F32, values.data(), half, n);
    std::vector<uint16_t> mine(values.size());
    convertFloats(TESSEL_F32, values.data(), half, mine.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t t;
      std::memcpy(&t, theirs.data() + 2 * i, 2);
      if (std::isnan(values[size_t(i)]))
        EXPECT_EQ(mine[size_t(i)] & 0x8000, t & 0x8000);
      else
        ASSERT_EQ(mine[size_t(i)], t)
            << half << " from 0x" << std::hex << bitsOf(values[size_t(i)]);
    }
  }
  EXPECT_TRUE(canConvertFloats(TESSEL_F32, TESSEL_BF16));
  EXPECT_TRUE(canConvertFloats(TESSEL_F16, TESSEL_F32));
  EXPECT_FALSE(canConvertFloats(TESSEL_F64, TESSEL_F32));
  EXPECT_FALSE(canConvertFloats(TESSEL_BF16, TESSEL_F16));
}

//===--- The description --------------------------------------------------===//

json *tensorNamed(json &j, const std::string &role, const std::string &name) {
  for (json &t : j["tensors"])
    if (t["role"] == role && t["name"] == name)
      return &t;
  return nullptr;
}

// Tests that a bf16 model's master copy is parsed, found from its
// parameter, and that its gradient may be f32 or bf16.
TEST(MasterDescription, ParsesMasterOfAndGradientDtypes) {
  // master_of came with ABI 4; later versions keep it.
  EXPECT_GE(TESSEL_ABI_VERSION, 4);
  ModelDesc m = masterModel();
  const TensorDesc &master = tensorOf(m, "state", "w.master");
  EXPECT_TRUE(master.isMaster());
  EXPECT_EQ(*master.masterOf, "w");
  EXPECT_EQ(m.masterFor("w"), &master);
  EXPECT_EQ(m.masterFor("frozen"), nullptr);
  EXPECT_FALSE(tensorOf(m, "state", "w.m").isMaster());
  EXPECT_EQ(m.gradOf("w")->dtype, "f32");
  EXPECT_EQ(m.find("param", "w")->dtype, "bf16");
  EXPECT_EQ(m.precision, "bf16");
  EXPECT_EQ(masterKeyOf("fc.weight"), "fc.weight.master");

  MasterModelSpec spec;
  spec.gradDtype = "bf16";
  EXPECT_EQ(masterModel(spec).gradOf("w")->dtype, "bf16");
  spec.optimizer = "sgd";
  ModelDesc sgd = masterModel(spec);
  EXPECT_EQ(sgd.withRole("state").size(), 2u);
  EXPECT_EQ(sgd.withRole("state")[0]->name, "w.master");
  // A bf16 parameter without a master copy (declared so, ABI <= 3) loads.
  spec.withMaster = false;
  EXPECT_EQ(masterModel(spec).masterFor("w"), nullptr);
  // Older descriptions still load.
  json old = masterModelJson(specWith("f32"));
  old["abi_version"] = 3;
  EXPECT_EQ(parseModelDescription(old.dump(), "old.so").abiVersion, 3);
}

// Tests that every malformed master copy or gradient dtype fails with one
// line naming the file and the tensor.
TEST(MasterDescription, InvalidMastersNameTheTensor) {
  struct Case {
    const char *what;
    std::function<void(json &)> edit;
    std::string message;
  };
  auto master = [](json &j) -> json & {
    return *tensorNamed(j, "state", "w.master");
  };
  std::vector<Case> cases = {
      {"on a parameter",
       [](json &j) { (*tensorNamed(j, "param", "w"))["master_of"] = "w"; },
       "tensor 'w': \"master_of\" on a param tensor (only an optimizer "
       "state is a master copy)"},
      {"not a name", [&](json &j) { master(j)["master_of"] = 3; },
       "tensor 'w.master': \"master_of\" must name a parameter, got 3"},
      {"of nothing", [&](json &j) { master(j)["master_of"] = "x"; },
       "state 'w.master': \"master_of\" names 'x', not a parameter of the "
       "model"},
      {"of a frozen parameter",
       [&](json &j) { master(j)["master_of"] = "frozen"; },
       "state 'w.master': \"master_of\" names parameter 'frozen', which is "
       "not trainable"},
      {"of an f32 parameter",
       [&](json &j) {
         json &w = *tensorNamed(j, "param", "w");
         w["dtype"] = "f32";
         w["bytes"] = 84;
       },
       "state 'w.master': \"master_of\" names parameter 'w' of dtype f32 "
       "(only a bf16 or f16 parameter has a master copy)"},
      {"bf16 master",
       [&](json &j) {
         master(j)["dtype"] = "bf16";
         master(j)["bytes"] = 42;
       },
       "state 'w.master': a master copy must be f32, not bf16"},
      {"two masters",
       [&](json &j) {
         json second = master(j);
         second["name"] = "w.master2";
         j["tensors"].push_back(second);
       },
       "state 'w.master2': a second master copy of parameter 'w'"},
      {"another name",
       [&](json &j) { master(j)["name"] = "w.fp32"; },
       "state 'w.fp32': the master copy of 'w' must be named 'w.master' "
       "(its checkpoint key)"},
      {"another shape",
       [&](json &j) {
         master(j)["shape"] = {7, 3};
       },
       "state 'w.master': global shape [7, 3] differs from its parameter's "
       "[3, 7]"},
      {"gradient of another dtype",
       [](json &j) {
         json &g = *tensorNamed(j, "grad", "w");
         g["dtype"] = "f16";
         g["bytes"] = 42;
       },
       "grad 'w': dtype f16 is not its parameter's bf16 (only a bf16 or f16 "
       "parameter's gradient may be f32)"},
      {"f32 parameter, bf16 gradient",
       [](json &j) {
         json &w = *tensorNamed(j, "param", "w");
         w["dtype"] = "f32";
         w["bytes"] = 84;
         j["tensors"].erase(j["tensors"].begin() + 3); // w.master
         json &g = *tensorNamed(j, "grad", "w");
         g["dtype"] = "bf16";
         g["bytes"] = 42;
       },
       "grad 'w': dtype bf16 is not its parameter's f32"},
      {"gradient shape",
       [](json &j) { (*tensorNamed(j, "grad", "w"))["shape"] = {7, 3}; },
       "grad 'w': shape differs from its parameter's"},
  };
  for (const Case &c : cases) {
    json j = masterModelJson(MasterModelSpec());
    c.edit(j);
    std::string error = errorOf([&] { parseModelDescription(j.dump(), "m.so"); });
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.what << ": " << error;
    EXPECT_EQ(error.find("model 'm.so': bad description: "), 0u)
        << c.what << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what;
  }
}

//===--- A fresh start ----------------------------------------------------===//

/// The f32 init of `count` elements of parameter `p` from global `first`.
std::vector<float> initF32(const TensorDesc &p, int64_t first, int64_t count,
                           uint64_t seed) {
  RankRuntime rt(std::max<int64_t>(count * 4, 64));
  tessel_init_param(rt.ctx, rt.arena, TESSEL_F32, first, count, p.initKind,
                    p.initArgs, seed, p.name.c_str());
  std::vector<float> out(static_cast<size_t>(count));
  tessel_copy_to_host(rt.ctx, out.data(), rt.arena, count * 4);
  return out;
}

/// Checks the rank at `coords` after initParams: the master holds the
/// param's f32 init at its global elements (zero padding), the parameter
/// (over its own block) that rounded, and the moments zero.
void expectFreshMaster(const ModelDesc &m, const std::vector<int64_t> &coords,
                       uint64_t seed) {
  RankRuntime rt(m.arenaBytes);
  const TensorDesc &w = tensorOf(m, "param", "w");
  const TensorDesc &master = tensorOf(m, "state", "w.master");
  const TensorDesc &moment = tensorOf(m, "state", "w.m");
  // Moments of a previous life, which zeroStates must clear either side of
  // initParams; the master must survive both.
  setValues(rt.ctx, rt.arena, moment, offGridValues(moment.numElements(), 3));
  zeroStates(m, rt.ctx, rt.arena);
  initParams(m, rt.ctx, rt.arena, seed, coords);
  zeroStates(m, rt.ctx, rt.arena);
  ASSERT_EQ(tessel_error(rt.ctx), nullptr);

  std::vector<float> global =
      initF32(w, 0, product(w.globalShape), seed);
  std::vector<float> masterValues = valuesAt(rt.ctx, rt.arena, master);
  std::vector<float> expected(masterValues.size(), 0.0f); // padding: zero
  int64_t covered = 0;
  forEachRun(blockOf(m, master, coords),
             [&](int64_t local, int64_t first, int64_t count) {
               for (int64_t i = 0; i < count; ++i)
                 expected[size_t(local + i)] = global[size_t(first + i)];
               covered += count;
             });
  EXPECT_GT(covered, 0);
  EXPECT_EQ(masterValues, expected);
  std::vector<uint16_t> paramBits = bf16BitsAt(rt.ctx, rt.arena, w);
  std::vector<uint16_t> rounded(paramBits.size(), 0);
  forEachRun(blockOf(m, w, coords),
             [&](int64_t local, int64_t first, int64_t count) {
               for (int64_t i = 0; i < count; ++i)
                 rounded[size_t(local + i)] =
                     roundedBits(global[size_t(first + i)]);
             });
  EXPECT_EQ(paramBits, rounded);
  for (float v : valuesAt(rt.ctx, rt.arena, moment))
    ASSERT_EQ(v, 0.0f);
  // frozen has no master: drawn in bf16 directly (ones either way).
  for (float v : valuesAt(rt.ctx, rt.arena, tensorOf(m, "param", "frozen")))
    EXPECT_EQ(v, 1.0f);
}

// Tests that on one device the master is the parameter's init in f32 and
// the bf16 parameter is it rounded, bit for bit; that the f32 run of the
// same model starts from exactly the master's values; and that zeroStates,
// before or after, clears the moments and keeps the master.
TEST(MasterInit, ParamIsItsMasterRoundedOnOneDevice) {
  ModelDesc m = masterModel();
  expectFreshMaster(m, {}, 7);
  ModelDesc f32 = masterModel(specWith("f32"));
  RankRuntime a(m.arenaBytes), b(f32.arenaBytes);
  initParams(m, a.ctx, a.arena, 7);
  initParams(f32, b.ctx, b.arena, 7);
  EXPECT_EQ(bytesAt(a.ctx, a.arena, tensorOf(m, "state", "w.master")),
            bytesAt(b.ctx, b.arena, tensorOf(f32, "param", "w")));
  // Some element rounds: the test sees the difference between the two.
  EXPECT_NE(valuesAt(a.ctx, a.arena, tensorOf(m, "param", "w")),
            valuesAt(a.ctx, a.arena, tensorOf(m, "state", "w.master")));
}

json zeroOf(const std::vector<std::string> &axes, int64_t dims,
            const std::vector<int64_t> &block) {
  return {{"axes", axes}, {"dims", dims}, {"block", block}};
}

// Tests that under ZeRO-1 (the whole parameter, its master a chunk of it on
// dp=2, the last chunk with a column of padding) and ZeRO-3 (both chunks)
// each rank's master is its chunk of the init and the parameter rounds the
// same values.
TEST(MasterInit, ZeroChunkedMaster) {
  MasterModelSpec spec;
  spec.mesh = {{"axes", {"dp"}}, {"shape", {2}}};
  spec.stateShape = {3, 4};
  spec.stateExtra = {{"zero", zeroOf({"dp"}, 1, {3, 7})}};
  ModelDesc zero1 = masterModel(spec);
  for (int64_t r = 0; r < 2; ++r)
    expectFreshMaster(zero1, {r}, 11);
  spec.paramShape = {3, 4};
  spec.paramExtra = spec.stateExtra;
  ModelDesc zero3 = masterModel(spec);
  for (int64_t r = 0; r < 2; ++r)
    expectFreshMaster(zero3, {r}, 11);
  // ZeRO over the whole block (dims 0) on dp=4: chunks of 6 of 21.
  spec.mesh = {{"axes", {"dp"}}, {"shape", {4}}};
  spec.paramShape = {3, 7};
  spec.paramExtra = json::object();
  spec.stateShape = {6};
  spec.stateExtra = {{"zero", zeroOf({"dp"}, 0, {3, 7})}};
  ModelDesc flat = masterModel(spec);
  for (int64_t r = 0; r < 4; ++r)
    expectFreshMaster(flat, {r}, 11);
}

// Tests that a pipeline stage's master holds its rows of the stacked
// parameter's init (rows [2, 4) of 6) and its parameter those rounded.
TEST(MasterInit, PipelineStageRows) {
  MasterModelSpec spec;
  spec.mesh = {{"axes", {"pp"}}, {"shape", {2}}};
  spec.paramShape = spec.stateShape = {2, 7};
  spec.paramExtra = spec.stateExtra = {{"layers", {2, 6}}};
  ModelDesc stage = masterModel(spec);
  EXPECT_EQ(tensorOf(stage, "state", "w.master").globalShape,
            (std::vector<int64_t>{6, 7}));
  expectFreshMaster(stage, {1}, 5);
}

} // namespace
