#include "protocol/sampling_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

namespace glm::protocol {
namespace {

using generation::FieldRange;
using generation::SamplingParams;

Status field_error(const std::string& field, const std::string& what) {
  return invalid_argument("field '" + field + "': " + what);
}

const char* canonical_name(const std::string& key) {
  if (key == "max_length" || key == "max_completion_tokens" || key == "max_output_tokens") {
    return "max_tokens";
  }
  return nullptr;
}

// A float as the shortest decimal that reads back as the same float (0.7f -> 0.7, not
// 0.699999988), so the wire shows what the client sent.
double shortest(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

template <class Json>
Status read_stop(const Json& value, const std::string& field, SamplingParams* p) {
  std::vector<const Json*> items;
  if (value.is_string()) {
    items.push_back(&value);
  } else if (value.is_array()) {
    for (const Json& item : value) items.push_back(&item);
  } else {
    return field_error(field, "expected a string or an array of strings");
  }
  if (static_cast<int>(items.size()) > generation::kMaxStop) {
    return field_error(field, "at most " + std::to_string(generation::kMaxStop) + " strings");
  }
  std::vector<std::string> stop;
  for (const Json* item : items) {
    if (!item->is_string()) return field_error(field, "expected a string or an array of strings");
    const auto& s = item->template get_ref<const std::string&>();
    if (s.empty()) return field_error(field, "stop strings must not be empty");
    if (s.size() > generation::kMaxStopBytes) {
      return field_error(field, "a stop string is " + std::to_string(s.size()) +
                                    " bytes; the limit is " +
                                    std::to_string(generation::kMaxStopBytes));
    }
    stop.push_back(s);
  }
  p->stop = std::move(stop);
  return Status::Ok();
}

// logit_bias: {"token id": bias, ...} (OpenAI's shape: ids as decimal strings).
template <class Json>
Status read_logit_bias(const Json& value, const std::string& field, SamplingParams* p) {
  if (!value.is_object()) {
    return field_error(field, "expected an object of token id (a decimal string) -> bias");
  }
  if (value.size() > static_cast<size_t>(generation::kMaxLogitBias)) {
    return field_error(field, "at most " + std::to_string(generation::kMaxLogitBias) + " tokens");
  }
  std::vector<generation::LogitBias> out;
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    const auto r = std::from_chars(key.data(), key.data() + key.size(), id);
    if (key.empty() || r.ec != std::errc() || r.ptr != key.data() + key.size() || id < 0 ||
        id > std::numeric_limits<int32_t>::max()) {
      return field_error(field, "'" + key.substr(0, 32) + "' is not a token id");
    }
    if (!it.value().is_number()) return field_error(field + "." + key, "expected a number");
    const double bias = it.value().template get<double>();
    if (!(std::fabs(bias) <= generation::kMaxLogitBiasValue)) {
      return field_error(field + "." + key, "a bias must be in [-100, 100]");
    }
    for (const generation::LogitBias& b : out) {
      if (b.token == id) return field_error(field, "token " + key + " appears twice");
    }
    out.push_back({static_cast<int32_t>(id), static_cast<float>(bias)});
  }
  p->logit_bias = std::move(out);
  return Status::Ok();
}

// Reads one numeric value of the member's type, checked against its range.
template <class Json, class T>
Status read_number(const Json& value, const FieldRange& r, const std::string& field, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number()) return field_error(field, "expected a number");
    const double v = value.template get<double>();
    if (!generation::in_range(r, v)) return field_error(field, generation::range_error(r, v));
    *out = static_cast<T>(v);
  } else {
    if (!value.is_number_integer()) return field_error(field, "expected an integer");
    if (std::is_unsigned_v<T> && !value.is_number_unsigned() && value.template get<int64_t>() < 0) {
      return field_error(field, "expected a non-negative integer");
    }
    if (value.is_number_unsigned()) {
      const uint64_t v = value.template get<uint64_t>();
      if (!generation::in_range(r, static_cast<double>(v))) {
        return field_error(field, generation::range_error(r, static_cast<double>(v)));
      }
      *out = static_cast<T>(v);
    } else {
      const int64_t v = value.template get<int64_t>();
      if (!generation::in_range(r, static_cast<double>(v))) {
        return field_error(field, generation::range_error(r, static_cast<double>(v)));
      }
      *out = static_cast<T>(v);
    }
  }
  return Status::Ok();
}

}  // namespace

template <class Json>
Status read_sampling_field(const std::string& key, const Json& value,
                           const std::string& field_prefix, SamplingParams* p, bool* known) {
  *known = false;
  const std::string field = field_prefix + key;
  if (key == "stop") {
    *known = true;
    return value.is_null() ? Status::Ok() : read_stop(value, field, p);
  }
  if (key == "logit_bias") {
    *known = true;
    return value.is_null() ? Status::Ok() : read_logit_bias(value, field, p);
  }
  const char* alias = canonical_name(key);
  const std::string name = alias != nullptr ? alias : key;
  Status status = Status::Ok();
  generation::for_each_field(*p, [&](const FieldRange& r, auto& member) {
    if (*known || name != r.name) return;
    *known = true;
    if (!value.is_null()) status = read_number(value, r, field, &member);
  });
  return status;
}

template <class Json>
Status read_sampling(const Json& obj, const std::string& field_prefix, SamplingParams* p) {
  if (!obj.is_object()) return Status::Ok();
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    GLM_RETURN_IF_ERROR(read_sampling_field(it.key(), it.value(), field_prefix, p, &known));
  }
  return Status::Ok();
}

bool is_sampling_field(const std::string& key) {
  if (key == "stop" || key == "logit_bias" || canonical_name(key) != nullptr) return true;
  bool known = false;
  const SamplingParams p;
  generation::for_each_field(p, [&](const FieldRange& r, const auto&) { known |= key == r.name; });
  return known;
}

std::string sampling_field_names() {
  std::string names;
  const SamplingParams p;
  generation::for_each_field(p, [&](const FieldRange& r, const auto&) {
    names += r.name;
    names += ", ";
  });
  return names + "stop, logit_bias";
}

void write_sampling(const SamplingParams& p, nlohmann::ordered_json* obj) {
  const SamplingParams defaults;
  std::vector<double> default_values;
  generation::for_each_field(defaults, [&](const FieldRange&, const auto& m) {
    default_values.push_back(static_cast<double>(m));
  });
  size_t i = 0;
  generation::for_each_field(p, [&](const FieldRange& r, const auto& m) {
    if (static_cast<double>(m) == default_values[i++]) return;
    if constexpr (std::is_floating_point_v<std::decay_t<decltype(m)>>) {
      (*obj)[r.name] = shortest(m);
    } else {
      (*obj)[r.name] = m;
    }
  });
  if (!p.stop.empty()) (*obj)["stop"] = p.stop;
  if (!p.logit_bias.empty()) {
    nlohmann::ordered_json bias = nlohmann::ordered_json::object();
    for (const generation::LogitBias& b : p.logit_bias)
      bias[std::to_string(b.token)] = shortest(b.bias);
    (*obj)["logit_bias"] = std::move(bias);
  }
}

template Status read_sampling_field(const std::string&, const nlohmann::json&, const std::string&,
                                    SamplingParams*, bool*);
template Status read_sampling_field(const std::string&, const nlohmann::ordered_json&,
                                    const std::string&, SamplingParams*, bool*);
template Status read_sampling(const nlohmann::json&, const std::string&, SamplingParams*);
template Status read_sampling(const nlohmann::ordered_json&, const std::string&, SamplingParams*);

}  // namespace glm::protocol
