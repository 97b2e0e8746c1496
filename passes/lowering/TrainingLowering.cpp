//===- TrainingLowering.cpp - gradient norm, clipping, optimizer step -----===//
//
// The update entry's ops: they run on device-side scalars (runtime.h,
// "Optimizers") and update their state in place.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

#include <cstring>
#include <string>

using namespace mlir;

namespace tessel::lowering {
namespace {

/// Whether the update scalar `value` is f64 (ABI 18's entries) or f32.
bool isF64Scalar(Value value) {
  return tensorType(value).getElementType().isF64();
}

/// tessel_sum_squares accumulates: zero the result, then one call per
/// operand.
LogicalResult lowerSumSquares(nn::SumSquaresOp op, FunctionLowering &fl) {
  fl.call(rt::tessel_zero,
          {fl.ptr(op.getResult()), fl.i64(bytesOf(op.getResult()))});
  auto entry = isF64Scalar(op.getResult()) ? rt::tessel_sum_squares_f64
                                           : rt::tessel_sum_squares;
  for (Value input : op.getInputs())
    fl.call(entry, {fl.dtype(input), fl.ptr(input), fl.count(input),
                    fl.ptr(op.getResult())});
  return success();
}

LogicalResult lowerClipScale(nn::ClipScaleOp op, FunctionLowering &fl) {
  fl.call(isF64Scalar(op.getResult()) ? rt::tessel_clip_scale_f64
                                      : rt::tessel_clip_scale,
          {fl.ptr(op.getSumSquares()),
           fl.f64(op.getMaxNorm().convertToDouble()), fl.ptr(op.getGradScale()),
           fl.ptr(op.getResult())});
  return success();
}

// The structs' bytes are built in the function that reads them, padding
// zeroed first: a struct returned by value may lose its padding's zeros,
// which would make the .so differ from build to build and two equal
// optimizers compare unequal.

/// The bytes of the op's optimizer constants, a tessel_optimizer.
std::string optimizerBytes(nn::OptimizerStepOp op) {
  tessel_optimizer opt;
  std::memset(&opt, 0, sizeof(opt));
  opt.kind = static_cast<int32_t>(op.getOptimizer());
  opt.nesterov = op.getNesterov() ? 1 : 0;
  opt.momentum = op.getMomentum().convertToDouble();
  opt.beta1 = op.getBeta1().convertToDouble();
  opt.beta2 = op.getBeta2().convertToDouble();
  opt.eps = op.getEps().convertToDouble();
  opt.weight_decay = op.getWeightDecay().convertToDouble();
  return std::string(reinterpret_cast<const char *>(&opt), sizeof(opt));
}

/// The bytes of the op's learning-rate schedule, a tessel_lr_schedule.
std::string scheduleBytes(nn::OptimizerStepOp op) {
  tessel_lr_schedule schedule;
  std::memset(&schedule, 0, sizeof(schedule));
  schedule.kind = static_cast<int32_t>(op.getSchedule());
  schedule.lr = op.getLr().convertToDouble();
  schedule.min_lr = op.getMinLr().convertToDouble();
  schedule.warmup = static_cast<int64_t>(op.getWarmup());
  schedule.total_steps = static_cast<int64_t>(op.getTotalSteps());
  return std::string(reinterpret_cast<const char *>(&schedule),
                     sizeof(schedule));
}

/// What decides whether optimizer steps can be one grouped update: the
/// optimizer constants and schedule, dtypes, master weights or not, state
/// count and gradient scale.
struct UpdateKey {
  std::string optimizer, schedule;
  Type paramType, gradType;
  bool master;
  size_t states;
  Value scale;

  explicit UpdateKey(nn::OptimizerStepOp op)
      : optimizer(optimizerBytes(op)), schedule(scheduleBytes(op)),
        paramType(tensorType(op.getParam()).getElementType()),
        gradType(tensorType(op.getGrad()).getElementType()),
        master(op.getMasterWeights() != nullptr),
        states(op.getOptimizerStates().size()), scale(op.getScale()) {}
  bool operator==(const UpdateKey &o) const {
    return optimizer == o.optimizer && schedule == o.schedule &&
           paramType == o.paramType && gradType == o.gradType &&
           master == o.master && states == o.states && scale == o.scale;
  }
};

/// In place: result i is init i's memory. The optimizer's constants and
/// its schedule are two constant structs in the .so; the update count
/// (the runtime's step + 1) and the rate are the context's as the update
/// runs (the _current entries), so a step captured once replays with each
/// launch's. The steps that follow this one and share its constants are
/// one tessel_optimizer_update_group_current (one kernel on a GPU instead
/// of one per parameter).
LogicalResult lowerOptimizerStep(nn::OptimizerStepOp op, FunctionLowering &fl) {
  SmallVector<nn::OptimizerStepOp> group = {op};
  const UpdateKey key(op);
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    auto step = dyn_cast<nn::OptimizerStepOp>(next);
    // A step that reads an earlier member's result runs after it.
    if (!step || !(UpdateKey(step) == key) ||
        llvm::any_of(step->getOperands(), [&](Value v) {
          auto producer = v.getDefiningOp<nn::OptimizerStepOp>();
          return producer && llvm::is_contained(group, producer);
        }))
      break;
    group.push_back(step);
    fl.lowered.insert(step);
  }
  for (nn::OptimizerStepOp member : group)
    for (auto [result, init] : llvm::zip(member.getResults(), member.getOuts()))
      fl.pointers[result] = fl.ptr(init);
  PtrValue optPtr = fl.emit.bytesGlobal(fl.b, fl.loc, key.optimizer);
  PtrValue schedulePtr = fl.emit.bytesGlobal(fl.b, fl.loc, key.schedule);
  Value master = op.getMasterWeights();
  bool f64 = isF64Scalar(op.getScale());
  if (f64 || group.size() > 1) {
    // The group's table: per tensor its param, master weights (or null;
    // not in an f64 group, ABI 18, which has none), grad and two states.
    SmallVector<PtrValue> pointers;
    SmallVector<int64_t> counts;
    for (nn::OptimizerStepOp member : group) {
      OperandRange states = member.getOptimizerStates();
      pointers.push_back(fl.ptr(member.getParam()));
      if (!f64)
        pointers.push_back(fl.ptrOrNull(member.getMasterWeights()));
      pointers.append({fl.ptr(member.getGrad()),
                       states.size() > 0 ? fl.ptr(states[0]) : fl.null(),
                       states.size() > 1 ? fl.ptr(states[1]) : fl.null()});
      counts.push_back(tensorType(member.getParam()).getNumElements());
    }
    int64_t size = static_cast<int64_t>(group.size());
    // f64: always the grouped entry, a group of one included.
    if (f64)
      fl.call(rt::tessel_optimizer_update_f64_group_current,
              {optPtr, schedulePtr, fl.ptr(op.getScale()), fl.i64(size),
               fl.emit.ptrArray(fl.b, fl.loc, pointers), fl.i64Array(counts)});
    else
      fl.call(rt::tessel_optimizer_update_group_current,
              {optPtr, schedulePtr, fl.dtype(op.getParam()),
               fl.dtype(op.getGrad()), fl.i32(master ? 1 : 0),
               fl.ptr(op.getScale()), fl.i64(size),
               fl.emit.ptrArray(fl.b, fl.loc, pointers), fl.i64Array(counts)});
    return success();
  }
  OperandRange states = op.getOptimizerStates();
  PtrValue state0 = states.size() > 0 ? fl.ptr(states[0]) : fl.null();
  PtrValue state1 = states.size() > 1 ? fl.ptr(states[1]) : fl.null();
  Value param = op.getParam();
  if (master) {
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
