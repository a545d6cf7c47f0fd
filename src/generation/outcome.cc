#include "generation/outcome.h"

namespace glm::generation {
namespace {

template <class E, size_t N>
struct NameTable {
  struct Row {
    E value;
    const char* name;
  };
  Row rows[N];
  const char* name(E v) const {
    for (const Row& r : rows) {
      if (r.value == v) return r.name;
    }
    return rows[0].name;  // unreachable for a valid enum value
  }
  std::optional<E> parse(std::string_view s) const {
    for (const Row& r : rows) {
      if (s == r.name) return r.value;
    }
    return std::nullopt;
  }
};

constexpr NameTable<FinishReason, 3> kFinishReasons{{
    {FinishReason::kStop, "stop"},
    {FinishReason::kLength, "length"},
    {FinishReason::kCancelled, "cancelled"},
}};

constexpr NameTable<Health, 4> kHealth{{
    {Health::kLoading, "loading"},
    {Health::kReady, "ready"},
    {Health::kDraining, "draining"},
    {Health::kStopped, "stopped"},
}};

}  // namespace

const char* finish_reason_name(FinishReason r) { return kFinishReasons.name(r); }
std::optional<FinishReason> parse_finish_reason(std::string_view name) {
  return kFinishReasons.parse(name);
}
const char* health_name(Health h) { return kHealth.name(h); }
std::optional<Health> parse_health(std::string_view name) { return kHealth.parse(name); }

}  // namespace glm::generation
