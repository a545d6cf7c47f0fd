// Constraint: what a generation's text must be, guaranteed by grammar-constrained decoding
// (src/grammar, docs/grammar.md). The one definition carried by every layer: the OpenAI gateway
// fills it from response_format / grammar, the socket protocol maps it to and from JSON
// ("constraint"), the engine compiles it into a grammar at submit (a bad grammar or schema is
// refused there with kInvalidArgument naming the offending part) and the scheduler masks the
// logits of each step with it.
//
// Value type; thread-compatible. Holds text only (no compiled form), so it is cheap to copy and
// free of the grammar module.
#pragma once

#include <string>
#include <string_view>

namespace glm::generation {

struct Constraint {
  enum class Kind {
    kNone,        // unconstrained
    kGbnf,        // text = a GBNF grammar (llama.cpp's syntax) with a rule named root
    kJsonSchema,  // text = a JSON Schema as JSON text (key order kept: properties come out in it)
    kJsonObject,  // any JSON object; text unused
    // text = a JSON array of function objects ({"name", "parameters"}): the answer is a call
    // to one of them, in the model's own tool-call format (the engine's chat template decides
    // it), with arguments valid against the function's parameters schema.
    kToolCall,
  };
  Kind kind = Kind::kNone;
  std::string text;

  bool active() const { return kind != Kind::kNone; }
  bool operator==(const Constraint&) const = default;
};

// Wire names ("none", "gbnf", "json_schema", "json_object", "tool_call"), one table for every
// edge.
inline const char* constraint_kind_name(Constraint::Kind k) {
  switch (k) {
    case Constraint::Kind::kNone:
      return "none";
    case Constraint::Kind::kGbnf:
      return "gbnf";
    case Constraint::Kind::kJsonSchema:
      return "json_schema";
    case Constraint::Kind::kJsonObject:
      return "json_object";
    case Constraint::Kind::kToolCall:
      return "tool_call";
  }
  return "none";
}

// Inverse of constraint_kind_name; false if `name` is not one.
inline bool parse_constraint_kind(std::string_view name, Constraint::Kind* out) {
  for (Constraint::Kind k :
       {Constraint::Kind::kNone, Constraint::Kind::kGbnf, Constraint::Kind::kJsonSchema,
        Constraint::Kind::kJsonObject, Constraint::Kind::kToolCall}) {
    if (name == constraint_kind_name(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

}  // namespace glm::generation
