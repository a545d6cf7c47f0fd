#include "scheduler/ngram_draft.h"

#include <algorithm>

namespace glm::scheduler {
namespace {

constexpr int kInitialDraft = 4;
constexpr int kMaxPause = 16;  // steps

}  // namespace

int32_t ngram_next(const int32_t* context, int n) {
  for (int len = std::min(kNgramMax, n - 1); len >= kNgramMin; --len) {
    const int32_t* suffix = context + n - len;
    // An occurrence ending at m (m < n - 1, so context[m + 1] exists), most recent first.
    for (int m = n - 2; m >= len - 1; --m) {
      if (context[m] == suffix[len - 1] &&
          std::equal(suffix, suffix + len - 1, context + m - len + 1)) {
        return context[m + 1];
      }
    }
  }
  return -1;
}

int ngram_draft(std::vector<int32_t>* context, int k) {
  int n = 0;
  for (; n < k; ++n) {
    const int32_t next = ngram_next(context->data(), static_cast<int>(context->size()));
    if (next < 0) break;
    context->push_back(next);
  }
  return n;
}

DraftLength::DraftLength(int max_draft)
    : max_(std::max(max_draft, 0)), k_(std::min(kInitialDraft, max_)) {}

void DraftLength::verified(int drafted, int accepted) {
  if (drafted <= 0 || max_ == 0) return;
  if (accepted == drafted) {
    backoff_ = 1;
    if (drafted == k_) k_ = std::min(max_, k_ * 2);  // a short draft (no more guesses) says less
    return;
  }
  if (accepted > 0) {
    backoff_ = 1;
    k_ = std::max(1, accepted + 1);
    return;
  }
  if (k_ > 1) {
    k_ = 1;
    return;
  }
  pause_ = backoff_;  // a one-token draft missed: pause, longer each time it happens again
  backoff_ = std::min(2 * backoff_, kMaxPause);
}

}  // namespace glm::scheduler
