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

/// In place: result i is init i's memory. The 1-based update count is the
/// runtime's step + 1; the learning rate of that step comes from
/// tessel_lr_at; the optimizer's constants are one constant
/// tessel_optimizer struct in the .so.
LogicalResult lowerOptimizerStep(nn::OptimizerStepOp op, FunctionLowering &fl) {
  for (auto [result, init] : llvm::zip(op.getResults(), op.getOuts()))
    fl.pointers[result] = fl.ptr(init);
  tessel_optimizer opt = optimizerOf(op);
  PtrValue optPtr = fl.emit.bytesGlobal(
      fl.b, fl.loc,
      StringRef(reinterpret_cast<const char *>(&opt), sizeof(opt)));
  I64Value runtimeStep = fl.call(rt::tessel_get_step, {});
  I64Value step = fl.emit.add(fl.b, fl.loc, runtimeStep, fl.i64(1));
  F64Value lr =
      fl.emit.call(rt::tessel_lr_at, fl.b, fl.loc,
                   {fl.i32(static_cast<int32_t>(op.getSchedule())),
                    fl.f64(op.getLr().convertToDouble()),
                    fl.f64(op.getMinLr().convertToDouble()),
                    fl.i64(static_cast<int64_t>(op.getWarmup())),
                    fl.i64(static_cast<int64_t>(op.getTotalSteps())), step});
  OperandRange states = op.getOptimizerStates();
  Value param = op.getParam();
  if (Value master = op.getMasterWeights()) {
    fl.call(rt::tessel_optimizer_update_master,
            {optPtr, fl.dtype(param), fl.ptr(param), fl.ptr(master),
             fl.dtype(op.getGrad()), fl.ptr(op.getGrad()),
             fl.ptr(op.getScale()),
             states.size() > 0 ? fl.ptr(states[0]) : fl.null(),
             states.size() > 1 ? fl.ptr(states[1]) : fl.null(),
             fl.count(param), step, lr});
    return success();
  }
  fl.call(rt::tessel_optimizer_update,
          {optPtr, fl.dtype(param), fl.ptr(param), fl.ptr(op.getGrad()),
           fl.ptr(op.getScale()),
           states.size() > 0 ? fl.ptr(states[0]) : fl.null(),
           states.size() > 1 ? fl.ptr(states[1]) : fl.null(), fl.count(param),
           step, lr});
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
