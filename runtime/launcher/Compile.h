//===- Compile.h - tessel-compile for a .mlir model, and its flags --------===//
//
// tessel-run takes a .mlir model as readily as a .so: it runs the
// tessel-compile next to it with the training and partitioning flags it was
// given. Those settings are compiled in, so a .so — compiled here or not —
// is checked against the same flags before it runs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_COMPILE_H
#define TESSEL_LAUNCHER_COMPILE_H

#include "runtime/launcher/Args.h"
#include "runtime/launcher/ModelDescription.h"

#include <string>
#include <vector>

namespace tessel::run {

/// Compiles `mlirPath` with the tessel-compile next to this executable into
/// a fresh temporary .so and returns its path; `extraArgs` follow
/// `MODEL.mlir -o OUT.so` (the training flags).
std::string compileMlirModel(const std::string &mlirPath,
                             const std::vector<std::string> &extraArgs = {});

/// The tessel-compile arguments of a .mlir model: compileTrainingArgs, then
/// --mesh and the partitioning flags given (--rules, --sequence-parallel,
/// --local-batchnorm, --bucket-mb).
std::vector<std::string> compileArgs(const Options &options);

/// The training flags given, as tessel-compile arguments ("--lr", "0.01",
/// "--nesterov", ...). A warmup-cosine schedule without --total-steps ends
/// at --steps. --eval compiles the forward entry alone ("--no-train").
std::vector<std::string> compileTrainingArgs(const Options &options);

/// --mesh, when given, must be the mesh `model` (from `file`) was compiled
/// for, and --check-grads needs a model for one device; throws RunError
/// naming both meshes. `compiledHere` as for checkTrainingFlags.
void checkMesh(const Options &options, const ModelDesc &model,
               const std::string &file, bool compiledHere);

/// Each training flag given must equal what `model` (from `file`) was
/// compiled with; throws RunError naming the flag, both values and the
/// tessel-compile command that would give the asked value. `compiledHere`:
/// the launcher compiled the model with these flags itself, so a difference
/// is tessel-compile ignoring one.
void checkTrainingFlags(const Options &options, const ModelDesc &model,
                        const std::string &file, bool compiledHere);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_COMPILE_H
