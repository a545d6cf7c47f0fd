// The one generation event: what a request's stream tells its client, defined once here and
// carried unchanged from the engine (engine::Event adds its error Status) through the socket
// protocol (protocol::Event adds the wire's one-line replies: health, stats, tokens, cancel) to
// the gateway. Thread-compatible value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generation/logprobs.h"
#include "generation/outcome.h"
#include "generation/speculation.h"
#include "generation/tool_delta.h"
#include "generation/usage.h"

namespace glm::generation {

// A generation stream: kQueued, kNotice (maybe), kStart once; kProgress after each chunk of a
// prompt longer than one step; kToken many; then exactly one final kDone or kError. With n > 1
// choices, kToken carries the choice's `index` and each choice's end comes as a kChoiceDone
// before the final kDone. The socket's one-line replies follow (protocol only).
enum class EventType {
  kQueued,
  kStart,
  kProgress,  // prefill progress of a long prompt
  kToken,
  kNotice,
  kChoiceDone,  // n > 1: one choice ended (then the final kDone)
  kDone,
  kError,  // the stream's end on failure
  // The socket protocol's one-line replies (protocol::Event's fields).
  kHealth,
  kStats,
  kTokens,
  kCancel,
};

// Which fields are meaningful depends on `type` (docs/protocol.md).
struct Event {
  EventType type = EventType::kToken;
  std::string id;      // the request's (may be empty only for an error on an unreadable line)
  int index = 0;       // kToken, kChoiceDone: the choice (GenerateRequest::n)
  int position = 0;    // kQueued: requests ahead in the queue
  int prefilled = 0;   // kProgress: prompt tokens written so far (of to_prefill, the prompt
  int to_prefill = 0;  //   tokens that were not cached)
  Usage usage;         // kStart: prompt and cached tokens; kDone: all three (kChoiceDone: that
                       // choice's)
  std::string text;    // kToken: whole UTF-8 characters
  // kToken: a reasoning model's thinking (whole UTF-8 characters), apart from `text`: the part
  // of the answer between <think> and </think> (engine::Options::reasoning). Events carry one
  // or both; all reasoning comes before any text.
  std::string reasoning;
  // kToken, when the request asked for them (params.top_logprobs >= 0): the tokens this event
  // completes, in order (a token's text may go out with a later event; the tokens that
  // complete a stop string are never reported). May come with empty text at the end.
  std::vector<GeneratedLogprobs> logprobs;
  // With tools (the request's GenerateRequest::tools): the answer read for a call once, by the
  // engine (tok::ToolCallStream over `text`). kToken: the pieces this event's text completes;
  // kDone: what the reader held to the end (tok::ToolCallStream::finish). The gateway sends
  // these on instead of reading the text again.
  std::vector<ToolDelta> tool;
  // kToken: the ids of the tokens generated since the previous kToken event, whose text this
  // event completes (replaying all of them gives exactly the text sent so far: what resume
  // takes). kTokens (protocol): tokenize's ids, detokenize's and prompt's with `text`.
  std::vector<int32_t> tokens;
  std::string message;       // kNotice: what happened (protocol: kError's message too)
  int dropped_messages = 0;  // kNotice: oldest messages dropped to fit the context
  FinishReason finish_reason = FinishReason::kStop;  // kDone, kChoiceDone
  Timings timings;                                   // kDone, kChoiceDone
  // kDone, kChoiceDone: tokens drafted and accepted by speculative decoding (kDone of n > 1
  // choices: summed over them); written as "speculative" when any token was drafted.
  Speculation speculation;
};

}  // namespace glm::generation
