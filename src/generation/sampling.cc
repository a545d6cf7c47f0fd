#include "generation/sampling.h"

#include <cmath>
#include <cstdio>

namespace glm::generation {

bool in_range(const FieldRange& r, double v) {
  if (!std::isfinite(v)) return false;
  const bool above_lo = r.lo_open ? v > r.lo : v >= r.lo;
  return above_lo && v <= r.hi;
}

namespace {

// Integers as integers (1048576, not 1.04858e+06), the rest with 9 significant digits.
std::string number(double v) {
  char buf[40];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.9g", v);
  }
  return buf;
}

}  // namespace

std::string range_error(const FieldRange& r, double got) {
  std::string s = std::string("must be in ") + (r.lo_open ? "(" : "[") + number(r.lo) + ", " +
                  number(r.hi) + "]";
  if (*r.meaning != '\0') s += std::string(" (") + r.meaning + ")";
  return s + ", got " + number(got);
}

Status validate(const SamplingParams& p) {
  Status status = Status::Ok();
  for_each_field(p, [&](const FieldRange& r, const auto& value) {
    const double v = static_cast<double>(value);
    if (status.ok() && !in_range(r, v))
      status = invalid_argument(std::string(r.name) + " " + range_error(r, v));
  });
  if (!status.ok()) return status;
  if (static_cast<int>(p.stop.size()) > kMaxStop) {
    return invalid_argument("stop: at most " + std::to_string(kMaxStop) + " strings, got " +
                            std::to_string(p.stop.size()));
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) return invalid_argument("stop: stop strings must not be empty");
    if (s.size() > kMaxStopBytes) {
      return invalid_argument("stop: a stop string is " + std::to_string(s.size()) +
                              " bytes; the limit is " + std::to_string(kMaxStopBytes));
    }
  }
  if (static_cast<int>(p.logit_bias.size()) > kMaxLogitBias) {
    return invalid_argument("logit_bias: at most " + std::to_string(kMaxLogitBias) +
                            " tokens, got " + std::to_string(p.logit_bias.size()));
  }
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const LogitBias& b = p.logit_bias[i];
    if (b.token < 0) {
      return invalid_argument("logit_bias: token ids are non-negative, got " +
                              std::to_string(b.token));
    }
    if (!(std::fabs(b.bias) <= kMaxLogitBiasValue)) {
      return invalid_argument("logit_bias: the bias of token " + std::to_string(b.token) +
                              " must be in [-100, 100], got " + number(b.bias));
    }
    for (size_t j = 0; j < i; ++j) {
      if (p.logit_bias[j].token == b.token) {
        return invalid_argument("logit_bias: token " + std::to_string(b.token) + " appears twice");
      }
    }
  }
  return Status::Ok();
}

}  // namespace glm::generation
