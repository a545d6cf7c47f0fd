#include "api/tool_calls.h"

#include <algorithm>

#include "core/json.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace glm::api {
namespace {

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

}  // namespace

Status check_function(const nlohmann::ordered_json& f, const std::string& at,
                      const char* schema_field) {
  if (!f.is_object()) return invalid_argument(at + " must be an object");
  if (!f.contains("name") || !f["name"].is_string() ||
      !valid_function_name(f["name"].get<std::string>())) {
    return invalid_argument(at + ".name must be 1-64 letters, digits, '_' or '-'");
  }
  if (f.contains("description") && !f["description"].is_string()) {
    return invalid_argument(at + ".description must be a string");
  }
  if (f.contains("parameters") && !f["parameters"].is_null()) {
    if (!f["parameters"].is_object()) {
      return invalid_argument(at + "." + schema_field + " must be a JSON Schema object");
    }
    grammar::GrammarBuilder b;
    auto args = grammar::add_json_schema(&b, f["parameters"], "args");
    if (!args.ok()) {
      return invalid_argument(at + "." + schema_field + " " + args.status().message());
    }
  }
  return Status::Ok();
}

Status read_openai_tools(const nlohmann::ordered_json& tools, const std::string& where,
                         nlohmann::ordered_json* functions, std::vector<std::string>* names) {
  if (!tools.is_array()) return invalid_argument(where + " must be an array of functions");
  *functions = nlohmann::ordered_json::array();
  names->clear();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const nlohmann::ordered_json& t = tools[i];
    if (!t.is_object() || !t.contains("type") || t["type"] != "function") {
      return invalid_argument(at +
                              " must be {\"type\":\"function\",\"function\":{...}} (the only "
                              "tool type)");
    }
    if (!t.contains("function") || !t["function"].is_object()) {
      return invalid_argument(at +
                              ".function must be an object {\"name\",\"description\","
                              "\"parameters\"}");
    }
    const nlohmann::ordered_json& f = t["function"];
    GLM_RETURN_IF_ERROR(check_function(f, at + ".function"));
    const std::string name = f["name"].get<std::string>();
    if (std::find(names->begin(), names->end(), name) != names->end()) {
      return invalid_argument(at + ".function.name '" + name + "' is given twice");
    }
    names->push_back(name);
    functions->push_back(f);
  }
  return Status::Ok();
}

Status set_tools(const nlohmann::ordered_json& functions, const std::string& forced,
                 protocol::Request* request, std::vector<std::string>* tool_names) {
  *tool_names = generation::tool_names(functions);
  request->tools = functions;
  if (forced.empty()) return Status::Ok();
  if (request->constraint.active()) {
    return invalid_argument(
        "a forced tool choice cannot be combined with response_format or "
        "grammar");
  }
  nlohmann::ordered_json allowed = nlohmann::ordered_json::array();
  for (const auto& f : functions) {
    if (forced != "*" && f["name"] != forced) continue;
    nlohmann::ordered_json a = {{"name", f["name"]}};
    if (f.contains("parameters") && !f["parameters"].is_null()) a["parameters"] = f["parameters"];
    allowed.push_back(std::move(a));
  }
  request->constraint.kind = generation::Constraint::Kind::kToolCall;
  request->constraint.text = dump_json(allowed);
  if (forced != "*") *tool_names = {forced};
  return Status::Ok();
}

void ToolAnswerStream::route(const std::vector<ToolDelta>& deltas, std::vector<ToolDelta>* out) {
  for (const ToolDelta& d : deltas) {
    if (d.kind == ToolDelta::Kind::kCallStart) in_call_ = true;
    (in_call_ ? held_ : *out).push_back(d);
  }
}

std::vector<ToolDelta> ToolAnswerStream::feed(const std::vector<ToolDelta>& pieces) {
  std::vector<ToolDelta> out;
  route(pieces, &out);
  sent_any_ = sent_any_ || !out.empty();
  return out;
}

std::vector<ToolDelta> ToolAnswerStream::finish(Outcome outcome,
                                                const std::vector<ToolDelta>& end) {
  std::vector<ToolDelta> out;
  const bool cut_inside_call = std::any_of(end.begin(), end.end(), [](const ToolDelta& d) {
    return d.kind == ToolDelta::Kind::kCutCall;
  });
  if (!in_call_ && outcome == Outcome::kLength && cut_inside_call) {
    // Cut inside a GLM-4.5 <tool_call>: the text before it went out, the call's does not.
    cut_call_ = true;
    return {};
  }
  std::vector<ToolDelta> pieces = end;
  for (ToolDelta& d : pieces) {  // an unfinished call that was not cut is the text it is
    if (d.kind == ToolDelta::Kind::kCutCall) d.kind = ToolDelta::Kind::kContent;
  }
  route(pieces, &out);
  if (!in_call_ && !sent_any_ && outcome == Outcome::kLength) {
    // All of the answer was held as a possible name line: a call cut before its name was whole.
    const ToolAnswer a = join_tool_deltas(out);
    const bool name_prefix = std::any_of(names_.begin(), names_.end(), [&](const std::string& n) {
      return !a.content.empty() && n.size() >= a.content.size() &&
             n.compare(0, a.content.size(), a.content) == 0;
    });
    if (name_prefix) {
      cut_call_ = true;
      return {};
    }
  }
  if (!in_call_) return out;
  if (outcome == Outcome::kLength) {
    cut_call_ = true;
  } else {
    sent_call_ = true;
    for (ToolDelta& d : held_) out.push_back(std::move(d));
  }
  held_.clear();
  return out;
}

ToolAnswer read_whole_answer(const std::vector<std::string>& names,
                             const std::vector<ToolDelta>& pieces,
                             const std::vector<ToolDelta>& end, Outcome outcome) {
  ToolAnswerStream s(names);
  std::vector<ToolDelta> d = s.feed(pieces);
  for (ToolDelta& x : s.finish(outcome, end)) d.push_back(std::move(x));
  return join_tool_deltas(d);
}

}  // namespace glm::api
