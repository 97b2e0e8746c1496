//===- TrainingLowering.cpp - gradient norm, clipping, optimizer step -----===//
//
// The update entry's ops: they run on device-side scalars (runtime.h,
// "Optimizers") and update their state in place.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

/// tessel_sum_squares accumulates: zero the f32 result, then one call per
/// operand.
LogicalResult lowerSumSquares(nn::SumSquaresOp op, FunctionLowering &fl) {
  fl.call(rt::tessel_zero,
          {fl.ptr(op.getResult()), fl.i64(bytesOf(op.getResult()))});
  for (Value input : op.getInputs())
    fl.call(rt::tessel_sum_squares, {fl.dtype(input), fl.ptr(input),
                                     fl.count(input), fl.ptr(op.getResult())});
  return success();
}

LogicalResult lowerClipScale(nn::ClipScaleOp op, FunctionLowering &fl) {
  fl.call(rt::tessel_clip_scale,
          {fl.ptr(op.getSumSquares()),
           fl.f64(op.getMaxNorm().convertToDouble()), fl.ptr(op.getGradScale()),
           fl.ptr(op.getResult())});
  return success();
}

/// The optimizer's constants as the runtime's tessel_optimizer struct.
tessel_optimizer optimizerOf(nn::OptimizerStepOp op) {
  tessel_optimizer opt{};
  opt.kind = static_cast<int32_t>(op.getOptimizer());
  opt.nesterov = op.getNesterov() ? 1 : 0;
  opt.momentum = op.getMomentum().convertToDouble();
  opt.beta1 = op.getBeta1().convertToDouble();
  opt.beta2 = op.getBeta2().convertToDouble();
  opt.eps = op.getEps().convertToDouble();
  opt.weight_decay = op.getWeightDecay().convertToDouble();
  return opt;
}

/// The op's learning-rate schedule as the runtime's struct.
tessel_lr_schedule scheduleOf(nn::OptimizerStepOp op) {
  tessel_lr_schedule schedule{};
  schedule.kind = static_cast<int32_t>(op.getSchedule());
  schedule.lr = op.getLr().convertToDouble();
  schedule.min_lr = op.getMinLr().convertToDouble();
  schedule.warmup = static_cast<int64_t>(op.getWarmup());
  schedule.total_steps = static_cast<int64_t>(op.getTotalSteps());
  return schedule;
}

/// The bytes of a constant struct, as a global of the .so.
template <typename T> PtrValue structGlobal(FunctionLowering &fl, const T &v) {
  return fl.emit.bytesGlobal(
      fl.b, fl.loc, StringRef(reinterpret_cast<const char *>(&v), sizeof(v)));
}

/// In place: result i is init i's memory. The optimizer's constants and
/// its schedule are two constant structs in the .so; the update count
/// (the runtime's step + 1) and the rate are the context's as the update
/// runs (the _current entries), so a step captured once replays with each
/// launch's.
LogicalResult lowerOptimizerStep(nn::OptimizerStepOp op, FunctionLowering &fl) {
  for (auto [result, init] : llvm::zip(op.getResults(), op.getOuts()))
    fl.pointers[result] = fl.ptr(init);
  PtrValue optPtr = structGlobal(fl, optimizerOf(op));
  PtrValue schedulePtr = structGlobal(fl, scheduleOf(op));
  OperandRange states = op.getOptimizerStates();
  PtrValue state0 = states.size() > 0 ? fl.ptr(states[0]) : fl.null();
  PtrValue state1 = states.size() > 1 ? fl.ptr(states[1]) : fl.null();
  Value param = op.getParam();
  if (Value master = op.getMasterWeights()) {
    fl.call(rt::tessel_optimizer_update_master_current,
            {optPtr, schedulePtr, fl.dtype(param), fl.ptr(param),
             fl.ptr(master), fl.dtype(op.getGrad()), fl.ptr(op.getGrad()),
             fl.ptr(op.getScale()), state0, state1, fl.count(param)});
    return success();
  }
  fl.call(rt::tessel_optimizer_update_current,
          {optPtr, schedulePtr, fl.dtype(param), fl.ptr(param),
           fl.ptr(op.getGrad()), fl.ptr(op.getScale()), state0, state1,
           fl.count(param)});
  return success();
}

/// In place: acc += value.
LogicalResult lowerAccumulate(nn::AccumulateOp op, FunctionLowering &fl) {
  fl.pointers[op.getResult()] = fl.ptr(op.getAcc());
  fl.call(rt::tessel_binary,
          {fl.i32(TESSEL_ADD), fl.dtype(op.getAcc()), fl.ptr(op.getAcc()),
           fl.ptr(op.getValue()), fl.ptr(op.getAcc()), fl.count(op.getAcc())});
  return success();
}

} // namespace

void addTrainingLowerings(LoweringRegistry &registry) {
  registry.add<nn::SumSquaresOp>(lowerSumSquares);
  registry.add<nn::ClipScaleOp>(lowerClipScale);
  registry.add<nn::OptimizerStepOp>(lowerOptimizerStep);
  registry.add<nn::AccumulateOp>(lowerAccumulate);
}

} // namespace tessel::lowering
