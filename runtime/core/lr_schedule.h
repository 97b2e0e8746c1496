//===- lr_schedule.h - Learning-rate schedules, host and device -*- C++ -*-===//
//
// tessel_lr_at's arithmetic, once: the host entry point, the CPU backend and
// the CUDA optimizer kernels (which work the rate out on the device from the
// context's step, so a captured step replays with each launch's rate) all
// call lrAtStep. Each operation is rounded on its own (core/storage.h), so
// no FMA contraction on the device makes it differ from the host's.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_LR_SCHEDULE_H
#define TESSEL_RUNTIME_CORE_LR_SCHEDULE_H

#include "core/hd.h"
#include "core/storage.h"
#include "tessel/runtime.h"

#include <math.h>

namespace tessel {

/// Whether `kind` is a tessel_lr_schedule_kind.
TESSEL_HD bool isLrScheduleKind(int32_t kind) {
  return kind == TESSEL_LR_CONSTANT || kind == TESSEL_LR_WARMUP_COSINE;
}

/// The learning rate of 1-based `step` (runtime.h's tessel_lr_at); NaN for
/// an unknown kind.
TESSEL_HD double lrAtStep(int32_t kind, double lr, double minLr,
                          int64_t warmup, int64_t totalSteps, int64_t step) {
  using namespace stored;
  if (!isLrScheduleKind(kind))
    return nan("");
  if (warmup > 0 && step <= warmup)
    return mulRn(lr, double(step > 0 ? step : 0)) / double(warmup);
  if (kind == TESSEL_LR_CONSTANT || step >= totalSteps)
    return kind == TESSEL_LR_CONSTANT ? lr : minLr;
  double progress = double(step - warmup) / double(totalSteps - warmup);
  double cosine = addRn(1.0, cos(mulRn(M_PI, progress)));
  return addRn(minLr, mulRn(mulRn(0.5, subRn(lr, minLr)), cosine));
}

TESSEL_HD double lrAtStep(const tessel_lr_schedule &s, int64_t step) {
  return lrAtStep(s.kind, s.lr, s.min_lr, s.warmup, s.total_steps, step);
}

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_LR_SCHEDULE_H
