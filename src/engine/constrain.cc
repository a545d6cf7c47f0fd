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

StatusOr<grammar::Grammar> compile_constraint(const generation::Constraint& c) {
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
