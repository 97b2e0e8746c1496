//===- Training.h - Training flags against the compiled step --------------===//

#ifndef TESSEL_RUN_TRAINING_H
#define TESSEL_RUN_TRAINING_H

#include "Args.h"
#include "Model.h"

#include <string>
#include <vector>

namespace tessel::run {

/// The training flags given, as tessel-compile arguments ("--lr", "0.01",
/// "--nesterov", ...). A warmup-cosine schedule without --total-steps ends
/// at --steps. --eval compiles the forward entry alone ("--no-train").
std::vector<std::string> compileArgs(const Options &options);

/// Each training flag given must equal what `model` (from `file`) was
/// compiled with; throws RunError naming the flag, both values and the
/// tessel-compile command that would give the asked value. `compiledHere`:
/// the launcher compiled the model with these flags itself, so a difference
/// is tessel-compile ignoring one.
void checkTrainingFlags(const Options &options, const ModelDesc &model,
                        const std::string &file, bool compiledHere);

/// One line describing the optimizer: "adamw lr 0.0003 (warmup_cosine),
/// clip 1".
std::string describeTraining(const TrainConfig &train);

} // namespace tessel::run

#endif // TESSEL_RUN_TRAINING_H
