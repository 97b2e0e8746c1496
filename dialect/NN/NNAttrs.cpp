//===- NNAttrs.cpp - attributes of the nn dialect -------------------------===//

#include "dialect/NN/NNAttrs.h"
#include "dialect/NN/NNDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace tessel::nn;

#include "dialect/NN/NNEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/NN/NNAttrs.cpp.inc"

void NNDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/NN/NNAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr: #nn.init<kind[, number]*>
//===----------------------------------------------------------------------===//

Attribute InitAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown initialiser '" << keyword
                          << "' (expected zeros, ones, constant, normal, "
                             "truncated_normal or uniform)";
    return {};
  }
  SmallVector<double> args;
  while (succeeded(parser.parseOptionalComma())) {
    double value;
    if (parser.parseFloat(value))
      return {};
    args.push_back(value);
  }
  if (parser.parseGreater())
    return {};
  return InitAttr::getChecked([&] { return parser.emitError(loc); },
                              parser.getContext(), *kind,
                              DenseF64ArrayAttr::get(parser.getContext(), args));
}

/// The shortest of %g and %.17g that reads back as `value` (0.02, not
/// 2.000000e-02), as an MLIR float literal: with a '.' ("1.0", "1.0e+20";
/// "1" and "1e+20" do not parse as floats) and inf/nan as hex bits.
static std::string shortestDecimal(double value) {
  if (!std::isfinite(value))
    return "0x" + llvm::utohexstr(llvm::bit_cast<uint64_t>(value),
                                  /*LowerCase=*/false, /*Width=*/16);
  std::string text = llvm::formatv("{0}", llvm::format("%.17g", value)).str();
  for (const char *format : {"%g", "%.17g"}) {
    std::string candidate =
        llvm::formatv("{0}", llvm::format(format, value)).str();
    if (std::strtod(candidate.c_str(), nullptr) == value) {
      text = candidate;
      break;
    }
  }
  if (text.find('.') == std::string::npos)
    text.insert(std::min(text.find_first_of("eE"), text.size()), ".0");
  return text;
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyInitKind(getKind());
  for (double arg : getArgs().asArrayRef())
    printer << ", " << shortestDecimal(arg);
  printer << ">";
}

LogicalResult
InitAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                 InitKind kind, DenseF64ArrayAttr argsAttr) {
  ArrayRef<double> args = argsAttr.asArrayRef();
  auto expectArgs = [&](size_t min, size_t max,
                        StringRef what) -> LogicalResult {
    if (args.size() < min || args.size() > max)
      return emitError() << "#nn.init<" << stringifyInitKind(kind)
                         << "> takes " << what << ", got " << args.size()
                         << " number(s)";
    return success();
  };
  switch (kind) {
  case InitKind::zeros:
  case InitKind::ones:
    return expectArgs(0, 0, "no numbers");
  case InitKind::constant:
    return expectArgs(1, 1, "one number (the value)");
  case InitKind::normal:
  case InitKind::truncated_normal:
    if (failed(expectArgs(1, 2, "a standard deviation and an optional mean")))
      return failure();
    if (!(args[0] > 0.0))
      return emitError() << "#nn.init<" << stringifyInitKind(kind)
                         << "> needs a positive standard deviation, got "
                         << args[0];
    return success();
  case InitKind::uniform:
    if (failed(expectArgs(2, 2, "two numbers (low, high)")))
      return failure();
    if (!(args[0] < args[1]))
      return emitError() << "#nn.init<uniform> needs low < high, got "
                         << args[0] << " and " << args[1];
    return success();
  }
  return emitError() << "unknown initialiser kind";
}
