//===- Passes.h - every Tessel pass ------------------------------*- C++ -*-===//

#ifndef TESSEL_PASSES_PASSES_H
#define TESSEL_PASSES_PASSES_H

#include "dialect/NN/NNDialect.h"
#include "passes/TrainSettings.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tessel {

/// The sharding rules where none are given (tessel-propagate-sharding's,
/// tessel-repeat-kv-heads', the planner's): each logical axis to the mesh
/// axis Megatron splits it over.
inline constexpr llvm::StringLiteral kDefaultShardingRules =
    "batch=dp,seq=cp,mlp=tp,heads=tp,vocab=tp";

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// tessel-autodiff with training settings given as text (by key or flag
/// name), as its options take them: {{"lr", "3e-4"}, {"optimizer", "sgd"}}.
std::unique_ptr<mlir::Pass> createAutodiffPass(const TrainSettingTexts &settings);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace tessel

#endif // TESSEL_PASSES_PASSES_H
