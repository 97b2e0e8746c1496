//===- PipelineScheduleText.cpp - A schedule's text and JSON --------------===//
//
// A schedule's action lists as text ("rank 0: F0.0 s>1:F0.0 ...": the
// report's schedule, and an action in error messages) and as JSON (the
// description a stage's nn.pipeline carries), and the parser of one
// action's text (a model's own schedule is written in it).
//
//===----------------------------------------------------------------------===//

#include "runtime/config/PipelineSchedule.h"

using namespace tessel::pipeline;

std::string tessel::pipeline::formatAction(const Action &action) {
  auto pair = [&](char letter) {
    return letter + std::to_string(action.stage) + "." +
           std::to_string(action.microbatch);
  };
  switch (action.kind) {
  case ActionKind::Forward:
    return pair('F');
  case ActionKind::Backward:
    return pair('B');
  case ActionKind::BackwardInput:
    return pair('I');
  case ActionKind::BackwardWeight:
    return pair('W');
  case ActionKind::Send:
    return "s>" + std::to_string(action.peer) + ":" +
           pair(action.gradient ? 'B' : 'F');
  case ActionKind::Recv:
    return "r<" + std::to_string(action.peer) + ":" +
           pair(action.gradient ? 'B' : 'F');
  }
  return "?";
}

namespace {

/// Reads a decimal number below 2^31 at the front of `text` and drops it.
bool takeNumber(std::string_view &text, int &out) {
  size_t digits = 0;
  long long value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    value = value * 10 + (text[digits] - '0');
    if (value > 0x7fffffffLL)
      return false;
    ++digits;
  }
  if (digits == 0)
    return false;
  out = int(value);
  text.remove_prefix(digits);
  return true;
}

} // namespace

std::optional<Action> tessel::pipeline::parseAction(std::string_view text,
                                                    std::string &error) {
  const std::string quoted = "'" + std::string(text) + "'";
  auto fail = [&](const std::string &why) -> std::optional<Action> {
    error = quoted + ": " + why;
    return std::nullopt;
  };
  std::string_view rest = text;
  std::optional<ActionKind> transfer;
  int peer = -1;
  if (rest.size() >= 2 &&
      (rest.substr(0, 2) == "s>" || rest.substr(0, 2) == "r<")) {
    transfer = rest[0] == 's' ? ActionKind::Send : ActionKind::Recv;
    rest.remove_prefix(2);
    if (!takeNumber(rest, peer) || rest.empty() || rest.front() != ':')
      return fail(std::string("expected the peer rank and ':' after '") +
                  (*transfer == ActionKind::Send ? "s>" : "r<") +
                  "', e.g. s>1:F0.0");
    rest.remove_prefix(1);
  }
  if (rest.empty())
    return fail("expected F, B, I or W<stage>.<microbatch>, e.g. F0.1");
  const char letter = rest.front();
  std::optional<ActionKind> compute;
  switch (letter) {
  case 'F':
    compute = ActionKind::Forward;
    break;
  case 'B':
    compute = ActionKind::Backward;
    break;
  case 'I':
    compute = ActionKind::BackwardInput;
    break;
  case 'W':
    compute = ActionKind::BackwardWeight;
    break;
  default:
    return fail("expected F, B, I or W<stage>.<microbatch>, e.g. F0.1");
  }
  if (transfer && letter != 'F' && letter != 'B')
    return fail("a send or receive names F (an activation) or B (a "
                "gradient), e.g. r<1:B0.0");
  rest.remove_prefix(1);
  int stage = 0, microbatch = 0;
  if (!takeNumber(rest, stage) || rest.empty() || rest.front() != '.')
    return fail(std::string("expected <stage>.<microbatch> after '") + letter +
                "', e.g. " + letter + "0.1");
  rest.remove_prefix(1);
  if (!takeNumber(rest, microbatch))
    return fail(std::string("expected the microbatch after '") + letter +
                std::to_string(stage) + ".'");
  if (!rest.empty())
    return fail("unexpected '" + std::string(rest) + "' after the action");
  error.clear();
  if (transfer)
    return Action{*transfer, stage, microbatch, letter == 'B', peer};
  return Action{*compute, stage, microbatch};
}

std::string tessel::pipeline::formatSchedule(const Schedule &schedule) {
  std::string text;
  for (size_t rank = 0; rank < schedule.ranks.size(); ++rank) {
    text += "rank " + std::to_string(rank) + ":";
    for (const Action &action : schedule.ranks[rank])
      text += " " + formatAction(action);
    text += "\n";
  }
  return text;
}

namespace {

/// `text` as a JSON string, quotes included.
std::string jsonString(std::string_view text) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        out += "\\u00";
        out += hex[(c >> 4) & 0xf];
        out += hex[c & 0xf];
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

const char *actionKindName(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "forward";
  case ActionKind::Backward:
    return "backward";
  case ActionKind::BackwardInput:
    return "backward_input";
  case ActionKind::BackwardWeight:
    return "backward_weight";
  case ActionKind::Send:
    return "send";
  case ActionKind::Recv:
    return "recv";
  }
  return "?";
}

} // namespace

std::string tessel::pipeline::scheduleJson(const Schedule &schedule) {
  std::string json =
      "{\"schedule\":" + jsonString(scheduleName(schedule.kind)) +
      ",\"ranks\":" + std::to_string(schedule.shape.ranks) +
      ",\"microbatches\":" + std::to_string(schedule.shape.microbatches) +
      ",\"virtual_stages\":" + std::to_string(schedule.shape.virtualStages) +
      ",\"actions\":[";
  for (size_t rank = 0; rank < schedule.ranks.size(); ++rank) {
    json += rank ? ",[" : "[";
    for (size_t i = 0; i < schedule.ranks[rank].size(); ++i) {
      const Action &action = schedule.ranks[rank][i];
      json += (i ? ",{\"kind\":" : "{\"kind\":") +
              jsonString(actionKindName(action.kind)) +
              ",\"stage\":" + std::to_string(action.stage) +
              ",\"microbatch\":" + std::to_string(action.microbatch);
      if (action.kind == ActionKind::Send || action.kind == ActionKind::Recv)
        json += std::string(",\"gradient\":") +
                (action.gradient ? "true" : "false") +
                ",\"peer\":" + std::to_string(action.peer);
      json += "}";
    }
    json += "]";
  }
  return json + "]}";
}
