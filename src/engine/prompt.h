// Prompt planning for the engine: chat messages -> token ids under the context policy, and the
// split that lets turn N+1 of a conversation reuse turn N's KV cache (docs/engine.md).
//
// Context policy: while prompt + max_tokens exceeds n_ctx, drop the oldest whole turn (a user
// message and the assistant/observation messages after it); system messages are always kept and
// the last turn is never dropped. If the prompt still leaves no room to generate, the request is
// refused with context_overflow; otherwise max_tokens is lowered to what fits.
//
// Conversation split: history = the messages up to the last assistant message; tail = the prompt
// tokens after what re-rendering that history shares with the full prompt. The scheduler runs
// saved conversation tokens (the model's ACTUAL output) + tail when the saved conversation's tag
// equals digest(history). Used only where the cut is exact: the tail starts with a control token
// (role-token templates: ChatGLM3, GLM-4), or, for the raw template (no generation marker), the
// whole history render is a prefix of the prompt (the message boundary is a token boundary).
// Otherwise (other text templates, or a boundary the tokenizer merges) the token-prefix cache
// serves what it can.
// Pure functions; thread-safe given a thread-safe template (ChatTemplate is immutable).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace glm::engine {

// Digest of messages (role, trimmed content, metadata, tools): equal digests mean the same
// conversation text. digest_append extends a digest by one message.
constexpr uint64_t kEmptyDigest = 0x84222325cbf29ce4ull;
uint64_t digest_append(uint64_t digest, const tok::Message& message);

struct PromptPlan {
  std::vector<int32_t> prompt;         // the full prompt, after trimming
  std::vector<tok::Message> messages;  // the messages it renders (after trimming)
  int dropped_messages = 0;
  int max_tokens = 0;  // requested, or lowered to fit the context
  // Conversation split; history_tag = 0 and tail empty when not applicable.
  uint64_t history_tag = 0;
  std::vector<int32_t> tail;
  uint64_t messages_digest = kEmptyDigest;  // digest of all `messages`
  // The functions the answer may call (the request's tools): the engine reads its own answer as
  // the client will (tok::read_tool_answer), so that the next turn, which sends a call back as
  // its name and arguments, finds this turn's KV under the right tag.
  std::vector<std::string> tool_names;
  tok::ToolReading tool_reading;  // how their calls' values are typed, one call or several
};

// want_split: compute history_tag/tail (the request belongs to a conversation). `options` are
// the request's template options; a render that depends on them (GLM-4.5 without thinking) has
// digests of its own, so KV saved under one setting is never taken for the other's.
StatusOr<PromptPlan> plan_chat_prompt(const tok::ChatTemplate& chat_template,
                                      const tok::Tokenizer& tokenizer,
                                      std::vector<tok::Message> messages, int max_tokens, int n_ctx,
                                      bool want_split, const tok::TemplateOptions& options = {});

// The tokens around a raw prompt's text.
struct RawAffixes {
  std::vector<int32_t> prefix;  // BOS, or [gMASK] sop for ChatGLM2/3 and GLM-4
  std::vector<int32_t> suffix;  // [gMASK] <sop> for ChatGLM-6B
};

// Plain text between the affixes; no trimming.
StatusOr<PromptPlan> plan_raw_prompt(const tok::Tokenizer& tokenizer, const RawAffixes& affixes,
                                     const std::string& text, int max_tokens, int n_ctx);

// [gMASK] sop (<sop>) when the vocabulary has them: before the text, or after it when the
// model attends its prompt bidirectionally (ChatGLM-6B, whose tokenizer appends them and
// whose prompt must end in <sop>); else BOS before the text when add_bos and the vocabulary has
// one.
RawAffixes raw_affixes(const tok::Tokenizer& tokenizer, bool add_bos, bool bidirectional_prompt);

}  // namespace glm::engine
