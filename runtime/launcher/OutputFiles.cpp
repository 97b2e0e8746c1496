//===- OutputFiles.cpp - Outputs that never clobber inputs ----------------===//

#include "runtime/launcher/OutputFiles.h"
#include "runtime/launcher/Error.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace tessel::run;
namespace fs = std::filesystem;

namespace {

/// When this process started, to tell a temporary left by an earlier run
/// from one a live run (another process saving to the same path) is
/// writing now. Initialised with the launcher, before any run begins.
const std::time_t processStart = std::time(nullptr);

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseNameOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The mode a plain create gives (0666 or 0777 less the umask). umask() can
/// only be read by setting it: no other thread creates files meanwhile
/// (the ranks save one after another's barrier, rank 0 alone creates).
mode_t modeLessUmask(mode_t mode) {
  mode_t mask = ::umask(0);
  ::umask(mask);
  return mode & ~mask;
}

/// A --save-sharded directory must be new, or a sharded checkpoint (it is
/// replaced as a whole), or empty: anything else would be deleted with it.
void checkReplaceableDirectory(const std::string &flag,
                               const std::string &path) {
  struct stat st;
  // The directory is replaced by a rename: a symlink would be replaced,
  // not the directory it names.
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    throw RunError("cannot write " + flag + " directory '" + path +
                   "': it is a symbolic link (name the directory itself)");
  if (::stat(path.c_str(), &st) != 0)
    return;
  if (!S_ISDIR(st.st_mode))
    throw RunError("cannot write " + flag + " directory '" + path +
                   "': it exists and is not a directory");
  std::error_code error;
  bool empty = fs::is_empty(path, error);
  if (!error && !empty && !fs::exists(fs::path(path) / "index.json", error))
    throw RunError("cannot write " + flag + " directory '" + path +
                   "': it exists and is not a sharded checkpoint (no "
                   "index.json): refusing to replace it");
}

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return;
  // A filesystem that cannot sync a directory (EINVAL) still renamed.
  ::fsync(fd);
  ::close(fd);
}

/// A missing or unwritable directory, or a directory in the file's place:
/// found now rather than when the file is first written (for --save, after
/// the last step). `directory`: the output is a directory (--save-sharded)
/// written as a whole beside `path`.
void checkCreatable(const std::string &flag, const std::string &path,
                    bool directory = false) {
  std::string dir = directoryOf(path);
  struct stat st;
  if (directory)
    checkReplaceableDirectory(flag, path);
  else if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw RunError("cannot write " + flag + " file '" + path +
                   "': it is a directory");
  std::string kind = directory ? " directory '" : " file '";
  if (::stat(dir.c_str(), &st) != 0)
    throw RunError("cannot write " + flag + kind + path + "': directory '" +
                   dir + "': " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    throw RunError("cannot write " + flag + kind + path + "': '" + dir +
                   "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw RunError("cannot write " + flag + kind + path + "': directory '" +
                   dir + "': " + std::strerror(errno));
}

/// "PATH.tmp.<pid>.XXXXXX": the writer's pid in the name lets a later run
/// tell whether the writer is still alive.
std::string temporaryPrefix(const std::string &path) {
  return baseNameOf(path) + ".tmp.";
}

/// Removes the temporaries of `path` that a killed run left: only names of
/// this writer's pattern, only when their writer's pid is not alive here
/// AND the file was last written before this process started. Both, so
/// that a run on another host sharing the directory (its pid means nothing
/// here) or a recycled pid can at worst leave a stale file, never delete a
/// live run's temporary. `directories`: the temporaries are directories
/// (a sharded checkpoint's), removed with their contents; else regular
/// files.
void removeStaleTemporaries(const std::string &path, bool directories) {
  std::string dir = directoryOf(path), prefix = temporaryPrefix(path);
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  std::vector<std::string> stale;
  while (struct dirent *entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    // <pid>.XXXXXX
    std::string rest = name.substr(prefix.size());
    size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || rest.size() - dot - 1 != 6 ||
        rest.find_first_not_of("0123456789") != dot)
      continue;
    long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    if (pid <= 0 || pid == long(::getpid()))
      continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH)
      continue;
    std::string full = dir + "/" + name;
    struct stat st;
    if (::lstat(full.c_str(), &st) == 0 &&
        (directories ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) &&
        st.st_mtime < processStart)
      stale.push_back(full);
  }
  ::closedir(d);
  for (const std::string &file : stale) {
    if (directories) {
      std::error_code ignored;
      fs::remove_all(file, ignored);
    } else {
      ::unlink(file.c_str());
    }
  }
}

} // namespace

bool tessel::run::sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ea, eb;
  fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  if (ea || eb)
    return a == b;
  return ca == cb;
}

void tessel::run::checkOutputPaths(const Options &options) {
  std::vector<std::pair<std::string, std::string>> outputs, inputs;
  if (!options.metrics.empty())
    outputs.push_back({"--metrics", options.metrics});
  if (!options.trace.empty())
    outputs.push_back({"--trace", options.trace});
  if (!options.save.empty())
    outputs.push_back({"--save", options.save});
  if (!options.saveSharded.empty())
    outputs.push_back({"--save-sharded", options.saveSharded});
  inputs.push_back({"the model", options.model});
  if (!options.data.empty())
    inputs.push_back({"the --data file", options.data});
  if (!options.labels.empty())
    inputs.push_back({"the --labels file", options.labels});
  if (!options.evalData.empty())
    inputs.push_back({"the --eval-data file", options.evalData});
  if (!options.evalLabels.empty())
    inputs.push_back({"the --eval-labels file", options.evalLabels});
  if (!options.load.empty())
    inputs.push_back({"the --load checkpoint", options.load});
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[flag, path] = outputs[i];
    for (const auto &[what, input] : inputs) {
      // A checkpoint saved over the one it was loaded from is a resume
      // that keeps one file: the write is atomic and the load mapped it.
      if ((flag == "--save" || flag == "--save-sharded") &&
          what == "the --load checkpoint")
        continue;
      if (sameFile(path, input))
        throw UsageError(flag + " '" + path + "' is " + what + " '" + input +
                         "': refusing to overwrite it");
    }
    for (size_t j = 0; j < i; ++j)
      if (sameFile(path, outputs[j].second))
        throw UsageError(flag + " '" + path + "' is also the " +
                         outputs[j].first + " file");
  }
  for (const auto &[flag, path] : outputs)
    checkCreatable(flag, path, flag == "--save-sharded");
}

void tessel::run::writeFileAtomically(
    const std::string &path, const std::string &what,
    const std::function<void(std::FILE *, const std::string &)> &write) {
  removeStaleTemporaries(path, /*directories=*/false);
  std::string dir = directoryOf(path);
  std::string tmp = dir + "/" + temporaryPrefix(path) +
                    std::to_string(::getpid()) + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw RunError("cannot write " + what + " '" + path +
                   "': " + std::strerror(errno));
  // mkstemp makes the file 0600; the checkpoint gets the mode a plain
  // create would.
  ::fchmod(fd, modeLessUmask(0666));
  std::FILE *f = ::fdopen(fd, "wb");
  if (!f) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw RunError("cannot write " + what + " '" + tmp +
                   "': " + std::strerror(err));
  }
  try {
    write(f, tmp);
    if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
      throw RunError("cannot write " + what + " '" + tmp +
                     "': " + std::strerror(errno));
  } catch (...) {
    std::fclose(f);
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw RunError("cannot write " + what + " '" + tmp +
                   "': " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw RunError("cannot rename '" + tmp + "' to '" + path +
                   "': " + std::strerror(err));
  }
  // The rename is durable only once the directory is.
  syncDirectory(dir);
}

void tessel::run::writeFileDurably(
    const std::string &path, const std::string &what,
    const std::function<void(std::FILE *, const std::string &)> &write) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    throw RunError("cannot write " + what + " '" + path +
                   "': " + std::strerror(errno));
  std::FILE *f = ::fdopen(fd, "wb");
  if (!f) {
    int err = errno;
    ::close(fd);
    throw RunError("cannot write " + what + " '" + path +
                   "': " + std::strerror(err));
  }
  try {
    write(f, path);
    if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
      throw RunError("cannot write " + what + " '" + path +
                     "': " + std::strerror(errno));
  } catch (...) {
    std::fclose(f);
    throw;
  }
  if (std::fclose(f) != 0)
    throw RunError("cannot write " + what + " '" + path +
                   "': " + std::strerror(errno));
}

std::string tessel::run::createTemporaryDirectory(const std::string &path,
                                                  const std::string &what) {
  removeStaleTemporaries(path, /*directories=*/true);
  std::string tmp = directoryOf(path) + "/" + temporaryPrefix(path) +
                    std::to_string(::getpid()) + ".XXXXXX";
  if (!::mkdtemp(tmp.data()))
    throw RunError("cannot write " + what + " '" + path +
                   "': cannot create a temporary directory beside it: " +
                   std::strerror(errno));
  // mkdtemp makes it 0700; the checkpoint gets a plain mkdir's mode.
  ::chmod(tmp.c_str(), modeLessUmask(0777));
  return tmp;
}

void tessel::run::syncDirectoryOf(const std::string &path) {
  syncDirectory(path);
}

namespace {

/// renameat2(RENAME_EXCHANGE): both names stay taken throughout.
int exchangePaths(const std::string &a, const std::string &b) {
#ifdef SYS_renameat2
  return int(::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(),
                       1u << 1 /* RENAME_EXCHANGE */));
#else
  errno = ENOSYS;
  return -1;
#endif
}

} // namespace

void tessel::run::replaceDirectory(const std::string &tmp,
                                   const std::string &path,
                                   const std::string &what) {
  auto fail = [&](const std::string &action) {
    throw RunError("cannot " + action + " '" + tmp + "' to " + what + " '" +
                   path + "': " + std::strerror(errno));
  };
  struct stat st;
  bool exists = ::lstat(path.c_str(), &st) == 0;
  // A new name: a plain rename (which fails, rather than replace, if the
  // name was taken by a non-empty directory meanwhile).
  if (!exists) {
    if (std::rename(tmp.c_str(), path.c_str()) == 0) {
      syncDirectory(directoryOf(path));
      return;
    }
    if (errno != EEXIST && errno != ENOTEMPTY)
      fail("rename");
  }
  // Never replace what is not a checkpoint.
  checkReplaceableDirectory(what, path);
  // Swap the new checkpoint in at once: `path` names the old one until it
  // names the new one, then `tmp` holds the old one, removed.
  if (exchangePaths(tmp, path) != 0)
    fail("exchange");
  syncDirectory(directoryOf(path));
  std::error_code ignored;
  fs::remove_all(tmp, ignored);
}
