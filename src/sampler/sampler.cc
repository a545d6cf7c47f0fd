#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "sampler/softmax.h"

namespace glm::sampler {
namespace {

// Candidates examined before falling back to a full sort (top-p over a flat distribution).
constexpr int kPartialSort = 256;

bool better(const Candidate& a, const Candidate& b) {
  return a.p > b.p || (a.p == b.p && a.id < b.id);
}

uint64_t seed_or_random(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Keeps the first `keep` of *cand (less any of probability 0 at their end: a masked token is
// never kept, but one candidate always is), their probabilities times the inverse of their sum
// (summed in order, in double); returns *cand.
std::vector<Candidate>& normalize(std::vector<Candidate>* cand, size_t keep) {
  while (keep > 1 && (*cand)[keep - 1].p == 0.0f) --keep;
  cand->resize(keep);
  double kept = 0;
  for (const Candidate& c : *cand) kept += c.p;
  const double inv_kept = 1.0 / kept;  // a multiply a candidate, not a division
  for (Candidate& c : *cand) c.p = static_cast<float>(c.p * inv_kept);
  return *cand;
}

// Adds c[from .. to)'s probabilities to *mass in order until it reaches top_p: the index of the
// candidate that reached it, else `to` (top_p > 1: never).
size_t reach(const std::vector<Candidate>& c, size_t from, size_t to, double top_p, double* mass) {
  for (size_t n = from; n < to; ++n) {
    *mass += c[n].p;
    if (*mass >= top_p) return n;
  }
  return to;
}

// Sums e[0, n) in double, four chains at a time (the order a block's draw assumes nowhere).
double sum_block(const float* e, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += e[i];
    s1 += e[i + 1];
    s2 += e[i + 2];
    s3 += e[i + 3];
  }
  for (; i < n; ++i) s0 += e[i];
  return (s0 + s1) + (s2 + s3);
}

// The token a draw u in [0, 1) picks from weights e[0, n) (>= 0, not all 0), token `first`
// (-1: none) before the others and the rest in id order: the first whose cumulative weight
// passes u times the total, in double (the last of weight > 0 where rounding leaves u past
// them all). The block of 64 where it lies is found from the blocks' sums (in *sums), then the
// token one add at a time inside it: no candidate list, no sequential add over every token.
int32_t draw_weighted(const float* e, int n, int32_t first, double u, std::vector<double>* sums) {
  constexpr int kBlock = 64;
  const int n_blocks = (n + kBlock - 1) / kBlock;
  sums->resize(n_blocks);
  double total = 0;
  for (int b = 0; b < n_blocks; ++b) {
    (*sums)[b] = sum_block(e + b * kBlock, std::min(kBlock, n - b * kBlock));
    total += (*sums)[b];
  }
  double target = u * total;
  if (first >= 0) {
    if (target < e[first]) return first;
    target -= e[first];
    (*sums)[first / kBlock] -= e[first];  // the walk below passes over it
  }
  double acc = 0;
  for (int b = 0; b < n_blocks; ++b) {
    if (acc + (*sums)[b] <= target) {
      acc += (*sums)[b];
      continue;
    }
    // In this block, or (rounding between the two sums) just after it: one add at a time on.
    for (int i = b * kBlock; i < n; ++i) {
      if (i == first) continue;
      acc += e[i];
      if (target < acc) return i;
    }
    break;
  }
  for (int i = n - 1; i >= 0; --i) {
    if (e[i] > 0.0f && i != first) return i;
  }
  return first >= 0 ? first : 0;  // only the draft has weight
}

// Radix key of a probability (p >= 0, so its bits grow with it): ascending keys = descending p.
uint32_t key_of(float p) {
  uint32_t bits;
  std::memcpy(&bits, &p, sizeof(bits));
  return ~bits;
}

// Stable LSD radix sort of [0, n) of *c by key_of(p), 8 bits a pass (a pass whose byte is the
// same in every key is skipped). In id order before, so in better() order after: p descending,
// ties by id ascending, the one order std::sort(better) gives (better() is a total order).
void radix_sort(std::vector<Candidate>* c, size_t n, std::vector<Candidate>* tmp) {
  if (n == 0) return;
  tmp->resize(n);
  Candidate* a = c->data();
  Candidate* b = tmp->data();
  for (int shift = 0; shift < 32; shift += 8) {
    size_t count[257] = {};
    for (size_t i = 0; i < n; ++i) ++count[((key_of(a[i].p) >> shift) & 0xFF) + 1];
    if (count[((key_of(a[0].p) >> shift) & 0xFF) + 1] == n) continue;
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (size_t i = 0; i < n; ++i) b[count[(key_of(a[i].p) >> shift) & 0xFF]++] = a[i];
    std::swap(a, b);
  }
  if (a != c->data()) std::copy(a, a + n, c->data());
}

}  // namespace

// Puts *cand (in id order) in better() order as far as a top-p of `top_p` can reach: the
// candidates of the highest probability buckets (2048 buckets, an eighth of an octave each)
// whose mass reaches top_p + 1e-9 go first, sorted; the rest after them, unsorted. The margin
// is far above the rounding of summing the masses in another order (< 1e-11 for 2^16
// candidates), so the sorted prefix's running mass (summed in order) passes top_p inside it,
// and the scan that finds the nucleus never reaches the unsorted rest. When no bucket reaches
// it (top_p >= 1 - 1e-9, or no top-p: pass 2), everything is sorted. The result up to the
// nucleus is exactly that of sorting everything. Cost: O(n_vocab) plus a radix sort of the set.
void Sampler::sort_wide(std::vector<Candidate>* cand, double top_p) const {
  constexpr int kBucketShift = 20;  // 8 exponent + 3 mantissa bits of a float >= 0
  constexpr int kBuckets = 1 << (31 - kBucketShift);
  std::vector<Candidate>& c = *cand;
  auto bucket = [](float p) {
    uint32_t bits;
    std::memcpy(&bits, &p, sizeof(bits));
    return static_cast<int>(bits >> kBucketShift);
  };
  size_t n = c.size();
  if (top_p < 1.0) {
    std::vector<double> mass(kBuckets, 0.0);
    for (const Candidate& x : c) mass[bucket(x.p)] += x.p;
    double acc = 0;
    int low = -1;
    for (int b = kBuckets - 1; b >= 0; --b) {
      acc += mass[b];
      if (acc >= top_p + 1e-9) {
        low = b;
        break;
      }
    }
    if (low > 0) {
      // Stable partition: the buckets >= low first, each side in id order.
      std::vector<Candidate>& rest = radix_tmp_;
      rest.clear();
      n = 0;
      for (const Candidate& x : c) {
        if (bucket(x.p) >= low) {
          c[n++] = x;
        } else {
          rest.push_back(x);
        }
      }
      std::copy(rest.begin(), rest.end(), c.begin() + n);
    }
  }
  radix_sort(&c, n, &radix_tmp_);
}

// The filters' answer when it lies among the tokens near the best: those within 7 nats of it
// (x * scale - max >= -7; a peaked distribution's nucleus is there, and there are few of them).
// Any other token has e below exp_nonpositive(-7) (the exponential is within 2 ulp: a margin of
// 1e-6 covers it), so p <= edge: the gathered tokens with p > edge, sorted, are exactly the
// first ones of the whole vocabulary's order. When top-k, min-p or top-p ends inside that
// prefix, *out holds the sorted gathered tokens and the count kept is returned: the full sort's
// answer, from sorting a few and an exponential of each (the same bits as exp_shifted's lanes).
// Otherwise 0 (more than kNearMost gathered, or the filters end past the prefix): the caller
// sorts wide. Cost: O(n_vocab) vector compares.
size_t Sampler::near_best(const Row& row, float max_x, double inv_sum, const Filters& f,
                          std::vector<Candidate>* out) const {
  constexpr float kNear = -7.0f;
  constexpr int kNearMost = 4 * kPartialSort;
  int32_t ids[kNearMost];
  const int n_near = gather_near(row.x, n_vocab_, row.scale, max_x, kNear, ids, kNearMost);
  if (n_near < 0) return 0;
  std::vector<Candidate>& g = *out;
  g.resize(n_near);
  for (int k = 0; k < n_near; ++k) {
    const float e = exp_nonpositive(row.x[ids[k]] * row.scale - max_x);
    g[k] = Candidate{ids[k], static_cast<float>(e * inv_sum)};
  }
  std::sort(g.begin(), g.end(), better);
  const float edge = static_cast<float>(exp_nonpositive(kNear) * (1.0 + 1e-6) * inv_sum);
  size_t exact = 0;  // the prefix of g that is the whole order's
  while (exact < g.size() && g[exact].p > edge) ++exact;
  size_t keep = std::min(f.keep, exact + 1);  // past `exact`: not settled here
  size_t min_p_kept = 0;
  while (min_p_kept < exact && g[min_p_kept].p >= f.min_p) ++min_p_kept;
  if (min_p_kept < exact) keep = std::min(keep, std::max<size_t>(min_p_kept, 1));
  double mass = 0;
  const size_t upto = std::min(keep, exact);
  const size_t n = reach(g, 0, upto, f.top_p, &mass);
  if (n < upto) keep = n + 1;  // the smallest prefix whose mass reaches top_p
  return keep <= exact ? keep : 0;
}

int32_t argmax(const float* values, int n) {
  GLM_CHECK(n > 0);
  // The largest value, then its first place: a loop that keeps the best index so far makes
  // each step wait on the last (a conditional move, then a load through it), ~7 cycles a value.
  const float best = max_value(values, n);
  for (int i = 0; i < n; ++i) {
    if (values[i] == best) return i;
  }
  return 0;  // values[0] is NaN (then nothing compares greater than it)
}

Sampler::Sampler(const SamplingParams& params, int n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(seed_or_random(params.seed)) {
  GLM_CHECK(n_vocab > 0);
  if (params_.repetition_penalty != 1.0f) seen_.assign(n_vocab, 0);
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    counts_.assign(n_vocab, 0);
  }
}

void Sampler::restart(const SamplingParams& params) {
  params_ = params;
  rng_.seed(seed_or_random(params.seed));
  for (int32_t id : seen_ids_) seen_[id] = 0;
  for (int32_t id : counted_ids_) counts_[id] = 0;
  seen_ids_.clear();
  counted_ids_.clear();
  // What the constructor sizes: empty tables say "no such penalty" (their memory is kept).
  if (params_.repetition_penalty == 1.0f) {
    seen_.clear();
  } else if (seen_.empty()) {
    seen_.assign(n_vocab_, 0);
  }
  if (params_.presence_penalty == 0.0f && params_.frequency_penalty == 0.0f) {
    counts_.clear();
  } else if (counts_.empty()) {
    counts_.assign(n_vocab_, 0);
  }
}

void Sampler::accept_prompt(int32_t token) {
  if (seen_.empty() || token < 0 || token >= n_vocab_) return;
  if (!seen_[token]) {
    seen_[token] = 1;
    seen_ids_.push_back(token);
  }
}

void Sampler::accept(int32_t token) {
  accept_prompt(token);
  if (counts_.empty() || token < 0 || token >= n_vocab_) return;
  if (counts_[token]++ == 0) counted_ids_.push_back(token);
}

void Sampler::copy_history_from(const Sampler& from) {
  GLM_CHECK(n_vocab_ == from.n_vocab_ && seen_.size() == from.seen_.size() &&
            counts_.size() == from.counts_.size());
  for (int32_t id : seen_ids_) seen_[id] = 0;
  for (int32_t id : counted_ids_) counts_[id] = 0;
  seen_ids_ = from.seen_ids_;
  counted_ids_ = from.counted_ids_;
  for (int32_t id : seen_ids_) seen_[id] = 1;
  for (int32_t id : counted_ids_) counts_[id] = from.counts_[id];
}

Sampler::Row Sampler::prepare(const float* logits, std::vector<float>* scratch) const {
  Row row{logits, 1.0f};
  if (params_.temperature > 0.0f && params_.temperature != 1.0f) {
    row.scale = 1.0f / params_.temperature;
  }
  const float penalty = params_.repetition_penalty;
  const bool repeat = penalty != 1.0f && penalty > 0.0f && !seen_ids_.empty();
  if (params_.logit_bias.empty() && !repeat && counted_ids_.empty()) return row;
  scratch->assign(logits, logits + n_vocab_);
  float* x = scratch->data();
  for (const generation::LogitBias& b : params_.logit_bias) {
    if (b.token < n_vocab_) x[b.token] += b.bias;
  }
  if (repeat) {
    for (int32_t id : seen_ids_) x[id] = x[id] > 0 ? x[id] / penalty : x[id] * penalty;
  }
  for (int32_t id : counted_ids_) {
    x[id] -= params_.frequency_penalty * static_cast<float>(counts_[id]) + params_.presence_penalty;
  }
  row.x = x;
  return row;
}

std::vector<Candidate> Sampler::distribution(const float* logits) const {
  std::vector<float> scratch;
  const Row row = prepare(logits, &scratch);
  return candidates(row, params_.temperature > 0.0f ? softmax_of(row) : Softmax{});
}

bool Sampler::filters() const {
  return (params_.top_k > 0 && params_.top_k < n_vocab_) || params_.min_p > 0.0f ||
         (params_.top_p > 0.0f && params_.top_p < 1.0f);
}

// The largest x * scale is the largest x times scale (> 0): rounding keeps the order.
Sampler::Softmax Sampler::softmax_of(const Row& row) const {
  Softmax sm;
  sm.max = max_value(row.x, n_vocab_) * row.scale;
  float* e = nullptr;
  if (params_.temperature > 0.0f && !filters()) {  // the same sum, stored or not (softmax.h)
    e_.resize(n_vocab_);
    e = e_.data();
  }
  sm.sum = exp_shifted(row.x, n_vocab_, row.scale, sm.max, e);
  sm.e = e;
  return sm;
}

std::vector<Candidate>& Sampler::candidates(const Row& row, const Softmax& sm) const {
  std::vector<Candidate>& cand = cand_;
  if (params_.temperature <= 0.0f) {
    cand.assign(1, Candidate{argmax(row.x, n_vocab_), 1.0f});
    return cand;
  }

  // Softmax: e = exp(x * scale - max) in vectors (softmax.h), their sum in double; a token's
  // probability is its e times the sum's inverse, as a float.
  const float max_x = sm.max;
  const double sum = sm.sum;
  const double inv_sum = 1.0 / sum;  // a multiply a token, not a division

  Filters f;
  f.keep = static_cast<size_t>(n_vocab_);
  // Top-k: keep the k best (softmax before or after top-k gives the same order, and top-p
  // below renormalises over what is kept).
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < f.keep) f.keep = params_.top_k;
  // Min-p: only tokens at least min_p times as probable as the best one (p(best) = 1 / sum,
  // as the best logit was subtracted before exp).
  if (params_.min_p > 0.0f) f.min_p = static_cast<float>(params_.min_p / sum);
  f.top_p = params_.top_p > 0.0f && params_.top_p < 1.0f ? params_.top_p : 2.0;

  // Where the near tokens do not settle it, every token's e (the same sum again), unless
  // softmax_of stored them with the sum.
  const float* e = sm.e;
  auto all_e = [&] {
    if (e != nullptr) return;
    e_.resize(n_vocab_);
    exp_shifted(row.x, n_vocab_, row.scale, max_x, e_.data());
    e = e_.data();
  };
  if (!filters()) {
    // Nothing filters: every token of nonzero probability, in id order (the draw walks them
    // so; sorting them would change no token's chance).
    all_e();
    cand.clear();
    for (int i = 0; i < n_vocab_; ++i) {
      const float p = static_cast<float>(e[i] * inv_sum);
      if (p > 0.0f) cand.push_back(Candidate{i, p});
    }
    return normalize(&cand, cand.size());
  }
  const size_t near = near_best(row, max_x, inv_sum, f, &cand);
  if (near > 0) return normalize(&cand, near);

  all_e();
  cand.resize(n_vocab_);
  for (int i = 0; i < n_vocab_; ++i) cand[i] = Candidate{i, static_cast<float>(e[i] * inv_sum)};
  size_t keep = f.keep;
  // Counting the tokens min-p keeps bounds `keep`; the sort below puts exactly those first.
  if (f.min_p > 0.0f) {
    size_t n = 0;
    for (const Candidate& c : cand) n += c.p >= f.min_p;
    keep = std::min(keep, std::max<size_t>(n, 1));
  }
  const bool use_top_p = f.top_p < 1.0;

  if (keep > static_cast<size_t>(kPartialSort)) {
    // A wide set (a flat distribution): sort only what top-p can keep, by radix.
    sort_wide(&cand, f.top_p);
    if (use_top_p) {
      double mass = 0;
      keep = std::min(keep, reach(cand, 0, keep, f.top_p, &mass) + 1);  // the smallest prefix
    }
    return normalize(&cand, keep);
  }

  // Sort the best candidates; try a partial sort first, full sort only if the nucleus is wider.
  size_t sorted = std::min<size_t>(keep, kPartialSort);
  std::partial_sort(cand.begin(), cand.begin() + sorted, cand.end(), better);
  if (use_top_p) {
    double mass = 0;
    size_t n = reach(cand, 0, sorted, f.top_p, &mass);
    if (n == sorted && sorted < keep) {  // the nucleus is wider than the partial sort
      std::sort(cand.begin() + sorted, cand.end(), better);
      n = reach(cand, sorted, keep, f.top_p, &mass);
    }
    keep = std::min(keep, n + 1);  // the smallest prefix whose mass reaches top_p
  } else if (sorted < keep) {
    std::sort(cand.begin() + sorted, cand.end(), better);
  }
  return normalize(&cand, keep);
}

void Sampler::skip_draws(int n_sampled) {
  if (params_.temperature <= 0.0f) return;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int i = 0; i < n_sampled; ++i) uniform(rng_);
}

void Sampler::log_softmax(const Row& row, const Softmax& sm, int32_t chosen,
                          generation::GeneratedLogprobs* out) {
  // log p(i) = x[i] - max - log(sum exp(x - max)), x the row times scale; the sum by the
  // softmax's own kernel (within 2e-6, so the log-probabilities within ~2e-6).
  const float* raw = row.x;
  const float scale = row.scale;
  auto x = [&](int32_t id) { return raw[id] * scale; };
  const double log_z = static_cast<double>(sm.max) + std::log(sm.sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(x(id) - log_z); };
  out->chosen = generation::TokenLogprob{chosen, "", logprob(chosen)};
  out->top.clear();
  const int n = std::min(params_.top_logprobs, n_vocab_);
  if (n <= 0) return;
  // The n best ids by logit (ties: lower id first) in one pass over the ids: a token enters
  // the sorted best-so-far only if it beats the n-th (an equal one came later: it loses).
  std::vector<int32_t>& best = ids_;
  best.clear();
  float nth = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float v = x(i);
    if (static_cast<int>(best.size()) == n && !(v > nth)) continue;
    if (std::isinf(v) && v < 0) continue;  // masked out: probability 0
    auto at = std::upper_bound(best.begin(), best.end(), v,
                               [&](float value, int32_t id) { return value > x(id); });
    best.insert(at, i);
    if (static_cast<int>(best.size()) > n) best.pop_back();
    if (static_cast<int>(best.size()) == n) nth = x(best.back());
  }
  for (int32_t id : best) out->top.push_back(generation::TokenLogprob{id, "", logprob(id)});
}

int32_t Sampler::sample(const float* logits, generation::GeneratedLogprobs* logprobs) {
  return sample_with_draft(logits, -1, logprobs);
}

int32_t Sampler::sample_with_draft(const float* logits, int32_t draft,
                                   generation::GeneratedLogprobs* logprobs) {
  const Row row = prepare(logits, &scratch_);
  const bool want_logprobs = logprobs != nullptr && params_.top_logprobs >= 0;
  const Softmax sm =
      params_.temperature > 0.0f || want_logprobs ? softmax_of(row) : Softmax{};  // once
  int32_t chosen = 0;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  if (params_.temperature <= 0.0f) {
    chosen = argmax(row.x, n_vocab_);
  } else if (!filters()) {
    // Every token of nonzero probability: drawn from the exponentials themselves (softmax_of
    // stored them), with the chance candidates() + draw() give it (the draft first), without
    // their list.
    const int32_t first = draft >= 0 && draft < n_vocab_ ? draft : -1;
    chosen = draw_weighted(sm.e, n_vocab_, first, uniform(rng_), &block_sums_);
  } else {
    std::vector<Candidate>& cand = candidates(row, sm);
    // The draft first: the draw accepts it with probability p(draft) (nothing moves when it
    // is not a candidate, or already first).
    for (size_t i = 1; i < cand.size() && draft >= 0; ++i) {
      if (cand[i].id == draft) {
        std::rotate(cand.begin(), cand.begin() + i, cand.begin() + i + 1);
        break;
      }
    }
    chosen = draw(cand, uniform(rng_));
  }
  if (want_logprobs) log_softmax(row, sm, chosen, logprobs);
  return chosen;
}

int32_t Sampler::draw(const std::vector<Candidate>& cand, double u) {
  GLM_CHECK(!cand.empty());
  double acc = 0;
  for (const Candidate& c : cand) {
    acc += c.p;
    if (u < acc) return c.id;
  }
  return cand.back().id;  // rounding: u landed past the last cumulative sum
}

int32_t Sampler::sample_with_draft_distribution(const float* logits, int32_t draft,
                                                const std::vector<Candidate>& q,
                                                generation::GeneratedLogprobs* logprobs) {
  double q_draft = 0;
  for (const Candidate& c : q) {
    if (c.id == draft) q_draft = c.p;
  }
  if (params_.temperature <= 0.0f || q_draft <= 0) return sample(logits, logprobs);
  const Row row = prepare(logits, &scratch_);
  const Softmax sm = softmax_of(row);
  const std::vector<Candidate>& p = candidates(row, sm);
  double p_draft = 0;
  for (const Candidate& c : p) {
    if (c.id == draft) p_draft = c.p;
  }
  const double a = std::min(1.0, p_draft / q_draft);  // acceptance probability
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double u = uniform(rng_);
  int32_t chosen = draft;
  if (u >= a) {
    // Rejected: u is uniform on [a, 1), so (u - a) / (1 - a) is uniform on [0, 1) and
    // independent of the draft. The residual max(0, p - q) is zero outside p's candidates.
    const double v = (u - a) / (1.0 - a);
    q_dense_.resize(n_vocab_, 0.0f);
    for (const Candidate& c : q) q_dense_[c.id] = c.p;
    std::vector<Candidate> r;
    double mass = 0;
    for (const Candidate& c : p) {
      const float d = c.p - q_dense_[c.id];
      if (d > 0) {
        r.push_back(Candidate{c.id, d});
        mass += d;
      }
    }
    for (const Candidate& c : q) q_dense_[c.id] = 0.0f;
    if (mass > 0) {
      for (Candidate& c : r) c.p = static_cast<float>(c.p / mass);
      chosen = draw(r, v);
    } else {
      chosen = draw(p, v);  // p == q up to rounding: a was 1 but for the last bit
    }
  }
  if (logprobs != nullptr && params_.top_logprobs >= 0) log_softmax(row, sm, chosen, logprobs);
  return chosen;
}

}  // namespace glm::sampler
