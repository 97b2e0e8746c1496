//===- ToolStack.h - Deeply nested input: a stated depth, a stack for it --===//
//
// The MLIR parser, verifier, printer and region walks recurse once per level
// of nesting (brackets, types, regions), so an input nested 10,000 levels
// deep overflows the 8 MiB main-thread stack (upstream mlir-opt crashes the
// same way). tessel-opt and tessel-compile refuse input nested deeper than
// kMaxNestingDepth with a located error, and run on a thread whose stack
// holds that depth with room to spare (reserved address space: only the
// pages a deep input touches are ever backed).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TOOLS_TOOLSTACK_H
#define TESSEL_TOOLS_TOOLSTACK_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/thread.h"

#include <optional>
#include <string>

namespace tessel::tools {

/// The deepest nesting of ( [ { < the tools accept.
inline constexpr unsigned kMaxNestingDepth = 10000;
/// The stack the tools run on: 25 KiB per level at kMaxNestingDepth (a
/// depth of 10,000 touches about 100 MiB of it).
inline constexpr unsigned kToolStackBytes = 256u << 20;

/// The offset of the first bracket that opens level kMaxNestingDepth + 1 of
/// `text`, outside string literals and // comments; nullopt when the input
/// stays within the limit. '>' closes a '<' only when one is open ("->"
/// and comparisons are not brackets).
inline std::optional<size_t> findTooDeepNesting(llvm::StringRef text) {
  unsigned depth = 0, angles = 0;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (c == '"') { // A string: up to its unescaped closing quote.
      for (++i; i < e && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == '/' && i + 1 < e && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        return std::nullopt;
      continue;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      angles += c == '<';
      if (++depth > kMaxNestingDepth)
        return i;
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && angles > 0 && text[i - 1] != '-')) {
      angles -= c == '>';
      depth -= depth > 0;
    }
  }
  return std::nullopt;
}

/// Reports, at its location, the first bracket of `input` past
/// kMaxNestingDepth; true when there is one (the input is refused).
inline bool refuseTooDeepNesting(const llvm::MemoryBuffer &input) {
  std::optional<size_t> at = findTooDeepNesting(input.getBuffer());
  if (!at)
    return false;
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(input.getBuffer(),
                                       input.getBufferIdentifier(),
                                       /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  sources.PrintMessage(llvm::SMLoc::getFromPointer(input.getBufferStart() + *at),
                       llvm::SourceMgr::DK_Error,
                       "nesting deeper than " +
                           std::to_string(kMaxNestingDepth) +
                           " levels of brackets, types or regions: refused");
  return true;
}

/// Runs `body` on a thread with a kToolStackBytes stack and returns its
/// result.
template <typename Body> int runOnToolStack(Body body) {
  int result = 1;
  llvm::thread worker(std::optional<unsigned>(kToolStackBytes),
                      [&] { result = body(); });
  worker.join();
  return result;
}

} // namespace tessel::tools

#endif // TESSEL_TOOLS_TOOLSTACK_H
