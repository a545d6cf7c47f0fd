#include "engine/prompt.h"

#include <algorithm>

#include "core/json.h"
#include "core/log.h"

namespace glm::engine {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

uint64_t mix(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;  // field separator
}

// Words for the client (what to do with the request); the operator's remedy goes to the log.
Status overflow(int n_prompt, int n_ctx, bool trimmed) {
  GLM_LOG_INFO("a prompt of %d tokens does not fit the context of %d (raise --ctx-size)", n_prompt,
               n_ctx);
  return Status(ErrorCode::kContextOverflow,
                "the conversation is " + std::to_string(n_prompt) + " tokens" +
                    (trimmed ? " even after dropping every earlier turn" : "") +
                    "; this server's context is " + std::to_string(n_ctx) +
                    " tokens: shorten the message or the system prompt, or start a new "
                    "conversation");
}

// Drops the oldest whole turn; false if only the last turn (or system messages) is left.
bool drop_oldest_turn(std::vector<tok::Message>* m, int* dropped) {
  size_t a = 0;
  while (a < m->size() && (*m)[a].role == "system") ++a;
  size_t b = a + 1;
  while (b < m->size() && (*m)[b].role != "user") ++b;
  if (a >= m->size() || b >= m->size()) return false;  // [a, b) is the last turn
  size_t out = a;
  for (size_t i = a; i < b; ++i) {
    if ((*m)[i].role == "system") {
      (*m)[out++] = std::move((*m)[i]);
    } else {
      ++*dropped;
    }
  }
  m->erase(m->begin() + out, m->begin() + b);
  return true;
}

}  // namespace

uint64_t digest_append(uint64_t digest, const tok::Message& message) {
  uint64_t h = mix(digest, message.role);
  h = mix(h, trim(message.content));
  h = mix(h, message.metadata);
  h = mix(h, message.tools.empty() ? std::string() : dump_json(*message.tools));
  h = mix(h, message.arguments);
  return h;
}

StatusOr<PromptPlan> plan_chat_prompt(const tok::ChatTemplate& chat_template,
                                      const tok::Tokenizer& tokenizer,
                                      std::vector<tok::Message> messages, int max_tokens, int n_ctx,
                                      bool want_split, const tok::TemplateOptions& options) {
  if (messages.empty()) return invalid_argument("messages is empty: send at least one message");
  // The digests' start: the options a render depends on, then the messages.
  const uint64_t start = options.enable_thinking ? kEmptyDigest : mix(kEmptyDigest, "no-thinking");
  auto digest = [start](const std::vector<tok::Message>& m) {
    uint64_t h = start;
    for (const tok::Message& x : m) h = digest_append(h, x);
    return h;
  };
  PromptPlan plan;
  auto rendered = chat_template.render_with(messages, options);
  if (!rendered.ok()) return rendered.status();
  plan.prompt = std::move(rendered.value());
  while (static_cast<int>(plan.prompt.size()) + max_tokens > n_ctx &&
         drop_oldest_turn(&messages, &plan.dropped_messages)) {
    rendered = chat_template.render_with(messages, options);
    if (!rendered.ok()) return rendered.status();
    plan.prompt = std::move(rendered.value());
  }
  const int n = static_cast<int>(plan.prompt.size());
  if (n >= n_ctx) return overflow(n, n_ctx, plan.dropped_messages > 0);
  plan.max_tokens = std::min(max_tokens, n_ctx - n);
  plan.messages_digest = digest(messages);

  if (want_split) {
    size_t k = messages.size();
    while (k > 0 && messages[k - 1].role != "assistant") --k;
    if (k > 0 && k < messages.size()) {  // an assistant message with something after it
      std::vector<tok::Message> history(messages.begin(), messages.begin() + k);
      auto h = chat_template.render_with(history, options);
      if (h.ok() && !h->empty()) {
        const std::vector<int32_t>& hist = h.value();
        // A history render that ends with the generation marker never shares it.
        const bool marker = chat_template.render_ends_with_marker();
        const size_t limit = std::min(hist.size() - (marker ? 1 : 0), plan.prompt.size());
        size_t l = 0;
        while (l < limit && hist[l] == plan.prompt[l]) ++l;
        // The cut is exact where the tail starts with a control token (role-token templates),
        // or, with no marker (raw), where the whole history render is a prefix of the prompt:
        // the message boundary is a token boundary, so the saved tokens (what the model
        // actually generated) can stand for the history's text.
        const bool exact = l < plan.prompt.size() &&
                           (marker ? tokenizer.is_control(plan.prompt[l]) : l == hist.size());
        if (exact) {
          plan.tail.assign(plan.prompt.begin() + l, plan.prompt.end());
          plan.history_tag = digest(history);
        }
      }
    }
  }
  plan.messages = std::move(messages);
  return plan;
}

StatusOr<PromptPlan> plan_raw_prompt(const tok::Tokenizer& tokenizer, const RawAffixes& affixes,
                                     const std::string& text, int max_tokens, int n_ctx) {
  PromptPlan plan;
  plan.prompt = affixes.prefix;
  const std::vector<int32_t> ids = tokenizer.encode(text);
  if (ids.empty() && affixes.prefix.empty()) {
    return invalid_argument("the prompt is empty: give some text");
  }
  plan.prompt.insert(plan.prompt.end(), ids.begin(), ids.end());
  plan.prompt.insert(plan.prompt.end(), affixes.suffix.begin(), affixes.suffix.end());
  const int n = static_cast<int>(plan.prompt.size());
  if (n >= n_ctx) return overflow(n, n_ctx, false);
  plan.max_tokens = std::min(max_tokens, n_ctx - n);
  return plan;
}

RawAffixes raw_affixes(const tok::Tokenizer& tokenizer, bool add_bos, bool bidirectional_prompt) {
  RawAffixes a;
  const int32_t gmask = tokenizer.find("[gMASK]");
  int32_t sop = tokenizer.find("sop");
  if (sop < 0) sop = tokenizer.find("<sop>");
  if (gmask >= 0 && sop >= 0) {
    (bidirectional_prompt ? a.suffix : a.prefix) = {gmask, sop};
  } else if (add_bos && tokenizer.bos_id() >= 0) {
    a.prefix = {tokenizer.bos_id()};
  }
  return a;
}

}  // namespace glm::engine
