//===- FakeLmModel.cpp - A hand-written language model .so for tests ------===//
//
// loss = cross_entropy(embed[ids] · head, labels): ids and labels [2, 4] in
// a 16-token vocabulary, width 8. The smallest model --data accepts.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/FakeLmDescription.h"
#include "tessel/runtime.h"

namespace {
constexpr int64_t embedOffset = 0, headOffset = 512, idsOffset = 1024,
                  labelOffset = 1088, lossOffset = 1152, hiddenOffset = 1216,
                  logitsOffset = 1472;

char *at(void *arena, int64_t offset) {
  return static_cast<char *>(arena) + offset;
}
} // namespace

extern "C" const char *tessel_model_json(void) {
  return kFakeLmDescription;
}

extern "C" void tessel_forward(tessel_ctx *ctx, void *arena) {
  tessel_embedding(ctx, TESSEL_F32, TESSEL_I32, at(arena, embedOffset),
                   at(arena, idsOffset), at(arena, hiddenOffset),
                   /*num_ids=*/8, /*rows=*/16, /*hidden=*/8,
                   /*row_offset=*/0, /*vocab=*/16);
  tessel_matmul(ctx, TESSEL_F32, at(arena, hiddenOffset), at(arena, headOffset),
                at(arena, logitsOffset), /*batch=*/1,
                /*m=*/8, /*n=*/16, /*k=*/8, 0, 0, /*b_shared=*/1);
  tessel_cross_entropy(ctx, TESSEL_F32, TESSEL_I32, at(arena, logitsOffset),
                       at(arena, labelOffset), at(arena, lossOffset),
                       /*rows=*/8, /*classes=*/16, TESSEL_LOSS_MEAN);
}
