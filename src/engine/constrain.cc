// Constrained decoding at the engine's edge: the vocabulary and the grammar of a request.
#include "engine/constrain.h"

#include <algorithm>
#include <string>

#include "core/json.h"
#include "core/log.h"
#include "grammar/json_schema.h"

namespace glm::engine {

std::shared_ptr<const grammar::TokenVocab> build_token_vocab(const tok::Tokenizer& tokenizer,
                                                             int n_vocab,
                                                             const std::vector<int32_t>& stop_ids) {
  const int n_tok = std::min(n_vocab, tokenizer.n_vocab());
  std::vector<std::string> tokens(static_cast<size_t>(std::max(n_vocab, 0)));
  std::vector<int32_t> stops;
  std::vector<int32_t> special;
  for (int32_t id : stop_ids) {
    if (id >= 0 && id < n_vocab) stops.push_back(id);
  }
  for (int32_t id = 0; id < n_tok; ++id) {
    const bool stop = std::find(stops.begin(), stops.end(), id) != stops.end();
    if (tokenizer.is_control(id)) {
      if (!stop) special.push_back(id);
      continue;
    }
    if (!stop) tokens[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  }
  auto vocab = grammar::TokenVocab::create(std::move(tokens), stops, special);
  if (!vocab.ok()) {
    GLM_LOG_ERROR("constrained decoding is off: %s", vocab.status().to_string().c_str());
    return nullptr;
  }
  return std::move(vocab).value();
}

namespace {

// GLM-4.5's arguments: per property of the object `schema`, in its order (the required ones
// always, the others optional), "<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n" where V is a
// string property's text as it is (no '<'; one of its enum values if it has them) and any other
// property's JSON value. No properties: no arguments. `nl`: "\n", or "" for GLM-4.7's format.
StatusOr<grammar::Expr> add_xml_arguments(grammar::GrammarBuilder* b,
                                          const nlohmann::ordered_json& schema,
                                          const std::string& prefix, const std::string& nl) {
  using grammar::Expr;
  std::vector<Expr> pairs{Expr::literal("")};
  if (!schema.is_object() || !schema.contains("properties")) return Expr::seq(std::move(pairs));
  const nlohmann::ordered_json& props = schema["properties"];
  if (!props.is_object()) return invalid_argument("properties must be an object");
  const nlohmann::ordered_json required =
      schema.contains("required") && schema["required"].is_array()
          ? schema["required"]
          : nlohmann::ordered_json::array();
  int i = 0;
  for (const auto& [key, sub] : props.items()) {
    if (key.find('<') != std::string::npos) {
      return invalid_argument("property '" + key + "' holds '<', which GLM-4.5's format cannot");
    }
    Expr value = Expr::literal("");
    const bool string_type = sub.is_object() && sub.contains("type") && sub["type"] == "string";
    const bool string_enum = sub.is_object() && sub.contains("enum") && sub["enum"].is_array() &&
                             !sub["enum"].empty() &&
                             std::all_of(sub["enum"].begin(), sub["enum"].end(),
                                         [](const auto& v) { return v.is_string(); });
    if (string_enum && (string_type || !sub.contains("type"))) {
      std::vector<Expr> values;
      for (const auto& v : sub["enum"]) values.push_back(Expr::literal(v.get<std::string>()));
      value = Expr::alt(std::move(values));
    } else if (string_type && !sub.contains("enum") && !sub.contains("const")) {
      const int max = sub.contains("maxLength") && sub["maxLength"].is_number_unsigned()
                          ? sub["maxLength"].get<int>()
                          : grammar::Expr::kUnbounded;
      value = Expr::repeat(Expr::chars({{'<', '<'}}, /*negated=*/true), 0, max);
    } else {
      auto v = grammar::add_json_schema(b, sub, prefix + "-" + std::to_string(i));
      if (!v.ok()) return v.status();
      value = *v;
    }
    Expr pair = Expr::seq({Expr::literal("<arg_key>" + key + "</arg_key>" + nl + "<arg_value>"),
                           value, Expr::literal("</arg_value>" + nl)});
    const bool req = std::find(required.begin(), required.end(), key) != required.end();
    pairs.push_back(req ? std::move(pair) : Expr::optional(std::move(pair)));
    ++i;
  }
  return Expr::seq(std::move(pairs));
}

// root ::= call-1 | call-2 | ...: one per allowed function, in the template's call format.
StatusOr<grammar::Grammar> tool_call_grammar(const std::string& tools_json,
                                             const std::string& chat_template) {
  const bool python = chat_template == "chatglm3";
  const bool xml = chat_template == "glm45" || chat_template == "glm47";
  const std::string nl = chat_template == "glm47" ? "" : "\n";  // GLM-4.7's calls: no newlines
  if (!python && !xml && chat_template != "glm4") {
    return unsupported("constraint: the " + chat_template +
                       " chat template has no tool-call format (ChatGLM3, GLM-4, GLM-4.5 and "
                       "GLM-4.7 have one)");
  }
  auto tools = parse_ordered_json(tools_json, "the constraint's tools");
  if (!tools.ok()) return invalid_argument("constraint: " + tools.status().message());
  if (!tools->is_array() || tools->empty()) {
    return invalid_argument("constraint: tool_call needs a non-empty array of functions");
  }
  grammar::GrammarBuilder b;
  std::vector<grammar::Expr> calls;
  for (size_t i = 0; i < tools->size(); ++i) {
    const nlohmann::ordered_json& f = (*tools)[i];
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) {
      return invalid_argument("constraint: tools[" + std::to_string(i) + "] has no name");
    }
    const std::string name = f["name"].get<std::string>();
    if (name.find('\n') != std::string::npos) {
      return invalid_argument("constraint: tool name '" + name + "' spans lines");
    }
    const nlohmann::ordered_json schema = f.contains("parameters") && !f["parameters"].is_null()
                                              ? f["parameters"]
                                              : nlohmann::ordered_json{{"type", "object"}};
    const std::string prefix = "tool" + std::to_string(i);
    StatusOr<grammar::Expr> args = python ? grammar::add_python_kwargs(&b, schema, prefix)
                                   : xml  ? add_xml_arguments(&b, schema, prefix, nl)
                                          : grammar::add_json_schema(&b, schema, prefix);
    if (!args.ok()) {
      return invalid_argument("constraint: tool '" + name + "' parameters " +
                              args.status().message());
    }
    if (xml) {
      calls.push_back(grammar::Expr::seq({grammar::Expr::literal("<tool_call>" + name + nl), *args,
                                          grammar::Expr::literal("</tool_call>")}));
    } else if (python) {
      calls.push_back(grammar::Expr::seq({grammar::Expr::literal(name + "\n```python\ntool_call("),
                                          *args, grammar::Expr::literal(")\n```")}));
    } else {
      calls.push_back(grammar::Expr::seq({grammar::Expr::literal(name + "\n"), *args}));
    }
  }
  GLM_RETURN_IF_ERROR(b.add_rule("root", grammar::Expr::alt(std::move(calls))));
  return b.build("root");
}

}  // namespace

StatusOr<grammar::Grammar> compile_constraint(const generation::Constraint& c,
                                              const std::string& chat_template) {
  using Kind = generation::Constraint::Kind;
  switch (c.kind) {
    case Kind::kNone:
      break;
    case Kind::kGbnf: {
      StatusOr<grammar::Grammar> g = grammar::parse_gbnf(c.text);
      if (!g.ok())
        return invalid_argument("constraint: invalid GBNF grammar: " + g.status().message());
      return g;
    }
    case Kind::kJsonSchema: {
      auto schema = parse_ordered_json(c.text, "the constraint's JSON schema");
      if (!schema.ok()) return invalid_argument("constraint: " + schema.status().message());
      StatusOr<grammar::Grammar> g = grammar::json_schema_to_grammar(*schema);
      if (!g.ok()) return invalid_argument("constraint: JSON schema " + g.status().message());
      return g;
    }
    case Kind::kJsonObject:
      return grammar::json_object_grammar();
    case Kind::kToolCall:
      return tool_call_grammar(c.text, chat_template);
  }
  return invalid_argument("constraint: no grammar for type none");
}

StatusOr<std::unique_ptr<grammar::Matcher>> start_matcher(
    grammar::Grammar grammar, std::shared_ptr<const grammar::TokenVocab> vocab) {
  if (vocab == nullptr) {
    return Status(ErrorCode::kUnsupported,
                  "constrained decoding is unavailable: this model's vocabulary could not be "
                  "prepared (see the engine log)");
  }
  const size_t n_tokens = vocab->n_tokens();
  auto m = std::make_unique<grammar::Matcher>(std::move(grammar), std::move(vocab));
  grammar::TokenMask mask(n_tokens);
  if (m->fill_mask(&mask).dead()) {
    return invalid_argument(
        "constraint: no token of this model's vocabulary can start the grammar's text");
  }
  return m;
}

}  // namespace glm::engine
