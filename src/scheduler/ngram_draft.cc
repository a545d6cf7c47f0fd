#include "scheduler/ngram_draft.h"

#include <algorithm>

namespace glm::scheduler {
namespace {

constexpr int kInitialDraft = 4;
constexpr int kMaxPause = 16;         // steps
constexpr int kMaxCostlyPause = 64;   // steps, when a draft costs a pass
constexpr int kNeverPaysPause = 256;  // steps, when it could not pay at any acceptance

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

int DraftLength::want() const {
  if (pause_ > 0) return 0;
  if (cost_.free() || k_ <= 1) return k_;
  return best().first;
}

std::pair<int, double> DraftLength::best() const {
  const double a = acceptance();
  double tokens = 1, power = 1;
  std::pair<int, double> best = {1, 0.0};
  for (int k = 1; k <= std::max(k_, 1); ++k) {
    power *= a;
    tokens += power;
    const double cost = 1 + cost_.verify * k + cost_.first + cost_.each * (k - 1);
    const double ratio = tokens / cost;
    if (ratio > best.second) best = {k, ratio};
  }
  return best;
}

void DraftLength::pause() {
  pause_ = backoff_;  // longer each time it happens again
  // A costly draft (a pass of a model) probes more rarely: a probe that does not pay costs about
  // a step, so at most ~1/64 of them.
  backoff_ = std::min(2 * backoff_, cost_.free() ? kMaxPause : kMaxCostlyPause);
}

void DraftLength::verified(int drafted, int accepted) {
  if (drafted <= 0 || max_ == 0) return;
  constexpr double kKeep = 0.8;  // of the counts, per verified draft
  hits_ = kKeep * hits_ + accepted;
  trials_ = kKeep * trials_ + accepted + (accepted < drafted ? 1 : 0);
  if (!cost_.free() && cost_.measured && cost_.first + cost_.verify >= 1) {
    pause_ = kNeverPaysPause;  // not even a sure draft pays for its passes: check rarely
    return;
  }
  if (accepted == drafted) {
    if (drafted == k_) k_ = std::min(max_, k_ * 2);  // a short draft (no more guesses) says less
  } else if (accepted > 0) {
    k_ = std::max(1, accepted + 1);
  } else if (k_ > 1) {
    k_ = 1;
    return;
  } else {
    pause();  // a one-token draft missed
    return;
  }
  if (!cost_.free() && best().second <= 1) {
    pause();  // no draft length pays: its pauses grow as a miss's
    return;
  }
  backoff_ = 1;  // a hit that pays ends the back-off
}

}  // namespace glm::scheduler
