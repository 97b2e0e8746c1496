//===- ReaderFuzzer.cpp - libFuzzer over the launcher's file readers ------===//
//
// Everything tessel-run reads from a file a user hands it: a model's JSON
// description (from the .so), a safetensors checkpoint and a .npy token
// file. The first input byte picks the reader, the rest is the file. A
// reader may refuse its input with RunError or UsageError (one clear line);
// anything else (a crash, an AddressSanitizer report, another exception
// escaping) is a finding. Built and run by scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/Data.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/ModelDescription.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Safetensors.h"
#include "test/launcher/FakeLmDescription.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

using namespace tessel::run;

namespace {

/// `bytes` written to a fresh file named with `suffix` (the readers take
/// paths and map them, as tessel-run does).
std::string writeInput(const uint8_t *bytes, size_t size,
                       const char *suffix) {
  static const std::string dir = [] {
    char pattern[] = "/tmp/tessel-fuzz-XXXXXX";
    return std::string(mkdtemp(pattern) ? pattern : "/tmp");
  }();
  std::string path = dir + "/input" + suffix;
  if (FILE *f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes, 1, size, f);
    std::fclose(f);
  }
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  static const ModelDesc model =
      parseModelDescription(kFakeLmDescription, "fuzz/lm.so");
  static RankRuntime rt(model.arenaBytes);
  const uint8_t *file = data + 1;
  size_t fileSize = size - 1;
  try {
    switch (data[0] % 3) {
    case 0:
      parseModelDescription(std::string(file, file + fileSize), "fuzz.so");
      break;
    case 1:
      loadSafetensors(writeInput(file, fileSize, ".safetensors"), model,
                      rt.ctx, rt.arena, /*training=*/false);
      break;
    default: {
      std::unique_ptr<BatchSource> tokens = makeTokenFileData(
          model, writeInput(file, fileSize, ".npy"), "", TokenDtype::U16);
      for (int64_t index : {int64_t(0), int64_t(1), int64_t(1) << 40})
        tokens->fill(index, rt.ctx, rt.arena);
    }
    }
  } catch (const RunError &) { // UsageError too: a refusal, not a finding
  }
  return 0;
}
