//===- OutputFiles.h - Outputs that never clobber inputs ------------------===//
//
// What keeps a run's files safe: its output paths (--metrics, --save) are
// checked against its inputs (the model, --load, --data) and against each
// other before anything is opened for writing, and a checkpoint is written
// to a temporary of its own beside the target, synced, then renamed over
// it, so a crash, a kill or two runs saving to one path never leave a
// half-written or mixed checkpoint behind.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_OUTPUTFILES_H
#define TESSEL_RUN_OUTPUTFILES_H

#include "runtime/launcher/Args.h"

#include <cstdio>
#include <functional>
#include <string>

namespace tessel::run {

/// Whether `a` and `b` name one file: the same device and inode when both
/// exist (a symlink or a hard link is caught), else the same canonical path.
bool sameFile(const std::string &a, const std::string &b);

/// Throws UsageError when an output of `options` names one of its inputs
/// or another output, and RunError when an output cannot be created (its
/// directory is missing or not writable, or it is a directory). Run before
/// the model is loaded, so a bad path fails fast and touches nothing.
void checkOutputPaths(const Options &options);

/// Writes `path` through `write(file, tempPath)`: into a fresh temporary
/// "PATH.tmp.<pid>.XXXXXX" in the same directory, flushed and fsynced, then
/// renamed over `path` and the directory fsynced. Stale temporaries of
/// `path` left by killed runs are removed first. On an error the temporary
/// is removed and RunError names `what` ("checkpoint").
void writeFileAtomically(
    const std::string &path, const std::string &what,
    const std::function<void(std::FILE *, const std::string &)> &write);

} // namespace tessel::run

#endif // TESSEL_RUN_OUTPUTFILES_H
