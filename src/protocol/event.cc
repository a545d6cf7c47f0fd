// Event lines: serialize and parse (protocol.h).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "protocol/protocol.h"

namespace glm::protocol {
namespace {

using json = nlohmann::json;

struct EventName {
  EventType type;
  const char* name;
};

constexpr EventName kEventNames[] = {
    {EventType::kQueued, "queued"},     {EventType::kStart, "start"},
    {EventType::kProgress, "progress"}, {EventType::kToken, "token"},
    {EventType::kNotice, "notice"},     {EventType::kDone, "done"},
    {EventType::kError, "error"},       {EventType::kHealth, "health"},
    {EventType::kStats, "stats"},       {EventType::kTokens, "tokens"},
    {EventType::kCancel, "cancel"},     {EventType::kChoiceDone, "choice_done"},
};

// Appends `s` as a JSON string literal (quotes included).
void append_json_string(std::string* out, const std::string& s) { out->append(dump_json(json(s))); }

int get_int(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int>() : 0;
}
int64_t get_int64(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}
double get_double(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}
bool get_bool(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
std::string get_str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A token or done event's "tool": [[KIND, TEXT], ...] (generation/tool_delta.h); none: absent.
nlohmann::json tool_deltas_json(const std::vector<generation::ToolDelta>& tool) {
  nlohmann::json out = nlohmann::json::array();
  for (const generation::ToolDelta& d : tool) {
    out.push_back(nlohmann::json::array({generation::tool_delta_kind_name(d.kind), d.text}));
  }
  return out;
}

Status read_tool_deltas(const json& j, std::vector<generation::ToolDelta>* out) {
  auto it = j.find("tool");
  if (it == j.end()) return Status::Ok();
  if (!it->is_array()) return invalid_argument("event's tool is not an array");
  for (const json& d : *it) {
    generation::ToolDelta delta;
    if (!d.is_array() || d.size() != 2 || !d[0].is_string() || !d[1].is_string() ||
        !generation::parse_tool_delta_kind(d[0].get<std::string>(), &delta.kind)) {
      return invalid_argument("event's tool has an entry that is not [KIND, TEXT]");
    }
    delta.text = d[1].get<std::string>();
    out->push_back(std::move(delta));
  }
  return Status::Ok();
}

// {"id":5,"bytes":[32,104],"logprob":-0.25}: bytes as numbers, since a token may end inside a
// UTF-8 character, which a JSON string cannot hold.
json token_logprob_json(const generation::TokenLogprob& t) {
  return {{"id", t.id}, {"bytes", json_byte_array(t.bytes)}, {"logprob", t.logprob}};
}

json logprobs_json(const std::vector<generation::GeneratedLogprobs>& all) {
  json out = json::array();
  for (const generation::GeneratedLogprobs& g : all) {
    json entry = token_logprob_json(g.chosen);
    json top = json::array();
    for (const generation::TokenLogprob& t : g.top) top.push_back(token_logprob_json(t));
    entry["top"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

generation::TokenLogprob read_token_logprob(const json& j) {
  generation::TokenLogprob t;
  if (!j.is_object()) return t;
  t.id = get_int(j, "id");
  t.logprob = static_cast<float>(get_double(j, "logprob"));
  if (auto it = j.find("bytes"); it != j.end() && it->is_array()) {
    for (const json& b : *it) {
      if (b.is_number_integer()) t.bytes.push_back(static_cast<char>(b.get<int>() & 0xff));
    }
  }
  return t;
}

std::vector<generation::GeneratedLogprobs> read_logprobs(const json& j) {
  std::vector<generation::GeneratedLogprobs> out;
  auto it = j.find("logprobs");
  if (it == j.end() || !it->is_array()) return out;
  for (const json& entry : *it) {
    generation::GeneratedLogprobs g;
    g.chosen = read_token_logprob(entry);
    if (entry.is_object()) {
      if (auto top = entry.find("top"); top != entry.end() && top->is_array()) {
        for (const json& t : *top) g.top.push_back(read_token_logprob(t));
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

// An array of token ids; entries that are not integers are skipped.
std::vector<int32_t> get_ids(const json& j, const char* key) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it != j.end() && it->is_array()) {
    for (const json& t : *it) {
      if (t.is_number_integer()) out.push_back(t.get<int32_t>());
    }
  }
  return out;
}

}  // namespace

int load_percent(uint64_t done, uint64_t total) {
  if (total == 0) return 0;
  return static_cast<int>(std::min<uint64_t>(done, total) * 100 / total);
}

const char* event_type_name(EventType t) {
  for (const EventName& e : kEventNames) {
    if (e.type == t) return e.name;
  }
  return "error";
}

std::string serialize_event(const Event& e) {
  // Insertion order: "id" and "event" lead every line, which reads well in `nc` output.
  using json = nlohmann::ordered_json;
  // Token events are by far the most frequent: build them without a JSON tree.
  if (e.type == EventType::kToken) {
    std::string out = "{\"id\":";
    append_json_string(&out, e.id);
    out += ",\"event\":\"token\",\"text\":";
    append_json_string(&out, e.text);
    if (!e.reasoning.empty()) {
      out += ",\"reasoning\":";
      append_json_string(&out, e.reasoning);
    }
    if (e.index > 0) out += ",\"index\":" + std::to_string(e.index);
    if (!e.tokens.empty()) {
      out += ",\"tokens\":[";
      for (size_t i = 0; i < e.tokens.size(); ++i) {
        if (i > 0) out += ',';
        out += std::to_string(e.tokens[i]);
      }
      out += ']';
    }
    if (!e.logprobs.empty()) {
      out += ",\"logprobs\":";
      out += dump_json(logprobs_json(e.logprobs));
    }
    if (!e.tool.empty()) {
      out += ",\"tool\":";
      out += dump_json(tool_deltas_json(e.tool));
    }
    out += '}';
    return out;
  }
  json j = json::object();
  if (e.id.empty()) {
    j["id"] = nullptr;
  } else {
    j["id"] = e.id;
  }
  j["event"] = event_type_name(e.type);
  switch (e.type) {
    case EventType::kQueued:
      j["position"] = e.position;
      break;
    case EventType::kStart:
      j["prompt_tokens"] = e.usage.prompt_tokens;
      j["cached_tokens"] = e.usage.cached_tokens;
      break;
    case EventType::kProgress:
      j["prefilled"] = e.prefilled;
      j["to_prefill"] = e.to_prefill;
      break;
    case EventType::kToken:
      break;
    case EventType::kNotice:
      j["message"] = e.message;
      j["dropped_messages"] = e.dropped_messages;
      break;
    case EventType::kChoiceDone:
    case EventType::kDone:
      if (e.type == EventType::kChoiceDone) j["index"] = e.index;
      j["finish_reason"] = generation::finish_reason_name(e.finish_reason);
      j["usage"] = {{"prompt_tokens", e.usage.prompt_tokens},
                    {"cached_tokens", e.usage.cached_tokens},
                    {"completion_tokens", e.usage.completion_tokens},
                    {"total_tokens", e.usage.prompt_tokens + e.usage.completion_tokens}};
      j["timings"] = {{"queue_ms", e.timings.queue_ms},
                      {"prefill_ms", e.timings.prefill_ms},
                      {"ttft_ms", e.timings.ttft_ms},
                      {"tpot_ms", e.timings.tpot_ms},
                      {"total_ms", e.timings.total_ms}};
      if (e.speculation.drafted > 0) {
        j["speculative"] = {{"drafted", e.speculation.drafted},
                            {"accepted", e.speculation.accepted}};
      }
      if (!e.tool.empty()) j["tool"] = tool_deltas_json(e.tool);
      break;
    case EventType::kError:
      j["code"] = error_code_name(e.code);
      j["message"] = e.message;
      if (e.retry_after_ms > 0) j["retry_after_ms"] = e.retry_after_ms;
      if (e.restart) j["restart"] = true;
      break;
    case EventType::kHealth:
      j["status"] = generation::health_name(e.health);
      j["model"] = e.model;
      j["n_ctx"] = e.n_ctx;
      if (!e.device.empty()) j["device"] = e.device;
      j["protocol"] = kProtocolVersion;
      if (!e.instance.empty()) j["instance"] = e.instance;
      if (!e.adapters.empty()) j["adapters"] = e.adapters;
      if (e.load_total_bytes > 0) {
        j["load"] = {{"done_bytes", e.load_done_bytes},
                     {"total_bytes", e.load_total_bytes},
                     {"percent", load_percent(e.load_done_bytes, e.load_total_bytes)}};
      }
      break;
    case EventType::kStats: {
      const StatsInfo& s = e.stats;
      j["queued"] = s.queued;
      j["running"] = s.running;
      j["kv_blocks_used"] = s.kv_blocks_used;
      j["kv_blocks_free"] = s.kv_blocks_free;
      j["requests_total"] = s.requests_total;
      j["prompt_tokens_total"] = s.prompt_tokens_total;
      j["cached_tokens_total"] = s.cached_tokens_total;
      j["generated_tokens_total"] = s.generated_tokens_total;
      j["spec_drafted_tokens_total"] = s.speculation.drafted;
      j["spec_accepted_tokens_total"] = s.speculation.accepted;
      j["whole_prompts_total"] = s.whole_prompts_total;
      j["connections"] = s.connections;
      j["uptime_s"] = s.uptime_s;
      break;
    }
    case EventType::kTokens:
      j["tokens"] = e.tokens;
      if (!e.text.empty()) j["text"] = e.text;
      break;
    case EventType::kCancel:
      j["found"] = e.found;
      break;
  }
  return dump_json(j);
}

StatusOr<Event> parse_event(std::string_view line) {
  auto parsed = parse_json(line, "event line");
  if (!parsed.ok() || !parsed->is_object()) {
    return invalid_argument("event line is not a JSON object");
  }
  const json& j = *parsed;
  const std::string name = get_str(j, "event");
  Event e;
  bool known = false;
  for (const EventName& n : kEventNames) {
    if (name == n.name) {
      e.type = n.type;
      known = true;
    }
  }
  if (!known) return invalid_argument("event line has unknown event '" + name + "'");
  e.id = get_str(j, "id");
  switch (e.type) {
    case EventType::kQueued:
      e.position = get_int(j, "position");
      break;
    case EventType::kStart:
      e.usage.prompt_tokens = get_int(j, "prompt_tokens");
      e.usage.cached_tokens = get_int(j, "cached_tokens");
      break;
    case EventType::kProgress:
      e.prefilled = get_int(j, "prefilled");
      e.to_prefill = get_int(j, "to_prefill");
      break;
    case EventType::kToken:
      e.text = get_str(j, "text");
      e.reasoning = get_str(j, "reasoning");
      e.index = get_int(j, "index");
      e.tokens = get_ids(j, "tokens");
      e.logprobs = read_logprobs(j);
      if (Status st = read_tool_deltas(j, &e.tool); !st.ok()) return st;
      break;
    case EventType::kNotice:
      e.message = get_str(j, "message");
      e.dropped_messages = get_int(j, "dropped_messages");
      break;
    case EventType::kChoiceDone:
    case EventType::kDone: {
      e.index = get_int(j, "index");
      // Absent (or not a string): kStop. A name this build does not know is a newer engine.
      const std::string reason = get_str(j, "finish_reason");
      const auto parsed = generation::parse_finish_reason(reason);
      if (!reason.empty() && !parsed) {
        return invalid_argument("done event has unknown finish_reason '" + reason + "'");
      }
      e.finish_reason = parsed.value_or(FinishReason::kStop);
      const json usage = j.value("usage", json::object());
      if (usage.is_object()) {
        e.usage.prompt_tokens = get_int(usage, "prompt_tokens");
        e.usage.cached_tokens = get_int(usage, "cached_tokens");
        e.usage.completion_tokens = get_int(usage, "completion_tokens");
      }
      const json t = j.value("timings", json::object());
      if (t.is_object()) {
        e.timings.queue_ms = get_double(t, "queue_ms");
        e.timings.prefill_ms = get_double(t, "prefill_ms");
        e.timings.ttft_ms = get_double(t, "ttft_ms");
        e.timings.tpot_ms = get_double(t, "tpot_ms");
        e.timings.total_ms = get_double(t, "total_ms");
      }
      const json spec = j.value("speculative", json::object());
      if (spec.is_object()) {
        e.speculation.drafted = get_int64(spec, "drafted");
        e.speculation.accepted = get_int64(spec, "accepted");
      }
      if (Status st = read_tool_deltas(j, &e.tool); !st.ok()) return st;
      break;
    }
    case EventType::kError:
      e.code = error_code_from_name(get_str(j, "code"));
      e.message = get_str(j, "message");
      e.retry_after_ms = get_int(j, "retry_after_ms");
      e.restart = get_bool(j, "restart");
      break;
    case EventType::kHealth: {
      const std::string status = get_str(j, "status");
      const auto health = generation::parse_health(status);
      if (!health) return invalid_argument("health event has unknown status '" + status + "'");
      e.health = *health;
      e.model = get_str(j, "model");
      e.n_ctx = get_int(j, "n_ctx");
      e.device = get_str(j, "device");
      e.instance = get_str(j, "instance");
      if (auto it = j.find("adapters"); it != j.end() && it->is_array()) {
        for (const auto& a : *it) {
          if (a.is_string()) e.adapters.push_back(a.get<std::string>());
        }
      }
      if (auto it = j.find("load"); it != j.end() && it->is_object()) {
        e.load_done_bytes = static_cast<uint64_t>(get_int64(*it, "done_bytes"));
        e.load_total_bytes = static_cast<uint64_t>(get_int64(*it, "total_bytes"));
      }
      break;
    }
    case EventType::kStats:
      e.stats.queued = get_int(j, "queued");
      e.stats.running = get_int(j, "running");
      e.stats.kv_blocks_used = get_int(j, "kv_blocks_used");
      e.stats.kv_blocks_free = get_int(j, "kv_blocks_free");
      e.stats.requests_total = get_int64(j, "requests_total");
      e.stats.prompt_tokens_total = get_int64(j, "prompt_tokens_total");
      e.stats.cached_tokens_total = get_int64(j, "cached_tokens_total");
      e.stats.generated_tokens_total = get_int64(j, "generated_tokens_total");
      e.stats.speculation.drafted = get_int64(j, "spec_drafted_tokens_total");
      e.stats.speculation.accepted = get_int64(j, "spec_accepted_tokens_total");
      e.stats.whole_prompts_total = get_int64(j, "whole_prompts_total");
      e.stats.connections = get_int(j, "connections");
      e.stats.uptime_s = get_double(j, "uptime_s");
      break;
    case EventType::kTokens:
      e.text = get_str(j, "text");
      e.tokens = get_ids(j, "tokens");
      break;
    case EventType::kCancel:
      e.found = j.contains("found") && j["found"].is_boolean() && j["found"].get<bool>();
      break;
  }
  return e;
}

Event error_event(const std::string& id, const Status& status, int retry_after_ms) {
  Event e;
  e.type = EventType::kError;
  e.id = id;
  e.code = status.ok() ? ErrorCode::kInternal : status.code();
  e.message = status.message();
  e.retry_after_ms = retry_after_ms;
  return e;
}

}  // namespace glm::protocol
