// HF fast tokenizers' tokenizer.json (byte-level BPE, as GLM-4-0414 / GLM-Z1 ship it) to the
// VocabSpec that llama.cpp's converter writes from it: tokens by id, merges in file order, the
// added tokens as control (special) or user-defined tokens, GLM-4's eos / eot.
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "tokenizer/vocab_convert.h"

namespace glm::tok {

StatusOr<VocabSpec> parse_hf_tokenizer_json(const std::string& text, const std::string& label) {
  auto parsed = parse_json(text, label.c_str());
  if (!parsed.ok()) return bad_file(parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    return bad_file(label + ": no \"model\" object (not a tokenizer.json)");
  }
  const nlohmann::json& m = j["model"];
  if (m.value("type", std::string()) != "BPE" || !m.contains("vocab") || !m["vocab"].is_object() ||
      !m.contains("merges") || !m["merges"].is_array()) {
    return unsupported(label + ": only byte-level BPE tokenizer.json files are read (GLM-4)");
  }
  constexpr int64_t kMaxTokens = int64_t{1} << 24;
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "glm4";  // llama.cpp's name for GLM-4-0414's pre-tokenizer (the chatglm-bpe rules)
  auto put = [&](const std::string& piece, int64_t id, int32_t type) -> Status {
    if (id < 0 || id >= kMaxTokens) {
      return bad_file(label + ": token id " + std::to_string(id) + " is out of range");
    }
    while (static_cast<int64_t>(s.tokens.size()) <= id) {
      s.tokens.push_back("[PAD" + std::to_string(s.tokens.size()) + "]");
      s.types.push_back(kTokenUnused);
    }
    s.tokens[id] = piece;
    s.types[id] = type;
    return Status::Ok();
  };
  for (const auto& [piece, id] : m["vocab"].items()) {
    if (!id.is_number_integer()) return bad_file(label + ": vocab id of a token is not a number");
    GLM_RETURN_IF_ERROR(put(piece, id.get<int64_t>(), kTokenNormal));
  }
  for (const nlohmann::json& merge : m["merges"]) {
    if (merge.is_string()) {  // "left right" (tokenizers < 0.20)
      s.merges.push_back(merge.get<std::string>());
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {  // ["left", "right"]
      s.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
    } else {
      return bad_file(label + ": a merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const nlohmann::json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        return bad_file(label + ": an added token lacks its id or content");
      }
      const int32_t type = a.value("special", false) ? kTokenControl : kTokenUserDefined;
      GLM_RETURN_IF_ERROR(put(a["content"].get<std::string>(), a["id"].get<int64_t>(), type));
    }
  }
  auto id_of = [&](const char* piece) {
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      if (s.tokens[i] == piece) return static_cast<int32_t>(i);
    }
    return int32_t{-1};
  };
  s.eos = id_of("<|endoftext|>");
  s.pad = s.eos;
  s.unk = s.eos;
  s.eot = id_of("<|user|>");
  s.add_bos = false;
  if (s.eos < 0) return bad_file(label + ": no <|endoftext|> token (not a GLM-4 tokenizer)");
  return s;
}

}  // namespace glm::tok
