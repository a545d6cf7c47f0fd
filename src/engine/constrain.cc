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

// root ::= call-1 | call-2 | ...: one per allowed function, in the template's call format.
StatusOr<grammar::Grammar> tool_call_grammar(const std::string& tools_json,
                                             const std::string& chat_template) {
  const bool python = chat_template == "chatglm3";
  if (!python && chat_template != "glm4") {
    return unsupported("constraint: the " + chat_template +
                       " chat template has no tool-call format (ChatGLM3 and GLM-4 have one)");
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
                                          : grammar::add_json_schema(&b, schema, prefix);
    if (!args.ok()) {
      return invalid_argument("constraint: tool '" + name + "' parameters " +
                              args.status().message());
    }
    if (python) {
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
