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

/// Writes a new file `path` (it must not exist) through `write(file,
/// path)`, flushed and fsynced before it is closed; RunError names `what`.
/// For a file inside a temporary directory that is renamed as a whole.
void writeFileDurably(
    const std::string &path, const std::string &what,
    const std::function<void(std::FILE *, const std::string &)> &write);

/// A fresh directory "PATH.tmp.<pid>.XXXXXX" (mkdtemp) beside `path`, with
/// a plain mkdir's mode, after removing the temporaries of `path` that dead
/// writers left (as writeFileAtomically does for files). RunError names
/// `what` ("--save-sharded").
std::string createTemporaryDirectory(const std::string &path,
                                     const std::string &what);

/// fsyncs directory `dir` (its entries), ignoring a file system that
/// cannot.
void syncDirectoryOf(const std::string &dir);

/// Puts directory `tmp` in the place of `path` at once: a rename when
/// `path` does not exist, else renameat2(RENAME_EXCHANGE) and the old
/// contents (then at `tmp`) removed; the parent directory is fsynced. A
/// crash at any moment leaves `path` the old or the new directory, whole.
/// An existing `path` must be a directory holding index.json, or empty
/// (checkOutputPaths checks the same before the run).
void replaceDirectory(const std::string &tmp, const std::string &path,
                      const std::string &what);

} // namespace tessel::run

#endif // TESSEL_RUN_OUTPUTFILES_H
