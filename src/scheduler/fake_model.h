// FakeModel: a deterministic stand-in for model::Model in scheduler and engine tests (in the
// spirit of mlc-llm's mock engine). Header-only, test use only.
//
// It behaves like a real model where the scheduler can get things wrong: forward() writes each
// input token into its own "KV cache" cell (block, offset) through the sequence's block table and
// computes the logits of the last position from the WHOLE context read back through that table.
// So a wrong block table, a reused block with the wrong content, a wrong n_past or a position
// never written changes the output or returns an error, exactly where a real model would produce
// garbage. Logits are a pseudo-random function of the context: logits[v] = g(hash(context), v).
// Thread-safety: none (called from the scheduler loop only). Counts its forward calls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "model/model.h"

namespace glm::testing {

class FakeModel : public model::Model {
 public:
  explicit FakeModel(int n_vocab = 64, int block_tokens = 16, int n_ctx = 4096)
      : block_tokens_(block_tokens) {
    config_.arch = model::Arch::kLlama;
    config_.arch_name = "fake";
    config_.n_vocab = n_vocab;
    config_.n_embd = 8;
    config_.n_ff = 8;
    config_.n_layer = 1;
    config_.n_head = 1;
    config_.n_head_kv = 1;
    config_.head_dim = 8;
    config_.n_ctx_train = n_ctx;
  }

  const model::Config& config() const override { return config_; }

  // Tokens the model never predicts (their logits are -1e9), e.g. stop ids to make a sequence
  // run to max_tokens. Set before the model is used.
  void set_never(std::vector<int32_t> ids) { never_ = std::move(ids); }
  const std::vector<int32_t>& never() const { return never_; }
  // Makes the model copy like an induction head (speculative decoding tests): the token that
  // followed the most recent earlier occurrence of the context's last token gets this much
  // more logit (the pseudo-random logits are in [0, 10)). Set before the model is used.
  void set_copy_bias(float bias) { copy_bias_ = bias; }
  float copy_bias() const { return copy_bias_; }
  // Sleeps this long in every forward (to hold the loop busy in threaded tests).
  void set_delay(std::chrono::microseconds d) { delay_us_ = d.count(); }
  // And this long more per token in the batch (a step's cost growing with its prompt tokens).
  void set_token_delay(std::chrono::microseconds d) { token_delay_us_ = d.count(); }
  int64_t n_forward() const { return n_forward_; }
  // Tokens run through forward() so far (prompt and decode): counts prefill work.
  int64_t n_tokens_run() const { return n_tokens_run_; }
  int64_t max_batch_seen() const { return max_batch_seen_; }

  // The logits this model gives after `context` (for the tests' expectations).
  static void logits_for(const std::vector<int32_t>& context, int n_vocab, float* out,
                         float copy_bias = 0) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : context) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
    for (int v = 0; v < n_vocab; ++v) {
      uint64_t x = h + 0x9e3779b97f4a7c15ull * (v + 1);
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 29;
      out[v] = static_cast<float>(x % 10007) / 1000.0f;
    }
    const int n = static_cast<int>(context.size());
    for (int m = n - 2; copy_bias != 0 && m >= 0; --m) {
      if (context[m] == context[n - 1]) {
        out[context[m + 1]] += copy_bias;
        break;
      }
    }
  }

  Status forward(const std::vector<model::SeqInput>& batch, model::KvPool* kv,
                 std::vector<float>* out, model::OutputKind kind) override {
    ++n_forward_;
    if (static_cast<int64_t>(batch.size()) > max_batch_seen_) max_batch_seen_ = batch.size();
    if (delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_.load()));
    if (token_delay_us_ > 0) {
      int64_t n = 0;
      for (const model::SeqInput& in : batch) n += in.n_tokens;
      std::this_thread::sleep_for(std::chrono::microseconds(token_delay_us_.load() * n));
    }
    const int nv = config_.n_vocab;
    std::vector<float> rows;
    for (const model::SeqInput& in : batch) {
      const int end = in.n_past + in.n_tokens;
      if (in.n_tokens <= 0 || in.n_blocks * block_tokens_ < end) {
        return invalid_argument("fake model: blocks do not cover the positions");
      }
      for (int i = 0; i < in.n_tokens; ++i) {
        if (in.tokens[i] < 0 || in.tokens[i] >= nv) return invalid_argument("fake: bad token");
      }
      n_tokens_run_ += in.n_tokens;
      for (int i = 0; i < in.n_tokens; ++i) {
        const int pos = in.n_past + i;
        cell(in.blocks[pos / block_tokens_], pos % block_tokens_) = in.tokens[i];
      }
      std::vector<int32_t> context;
      for (int pos = 0; pos < end; ++pos) {
        const int32_t t = cell(in.blocks[pos / block_tokens_], pos % block_tokens_);
        if (t < 0) return invalid_argument("fake model: reads a position never written");
        context.push_back(t);
      }
      const int first = in.all_logits ? in.n_past : end - 1;
      for (int pos = first; pos < end; ++pos) {
        std::vector<int32_t> prefix(context.begin(), context.begin() + pos + 1);
        const size_t at = rows.size();
        rows.resize(at + nv);
        logits_for(prefix, nv, rows.data() + at, copy_bias_);
        for (int32_t id : never_) rows[at + id] = -1e9f;
      }
    }
    out->insert(out->end(), rows.begin(), rows.end());
    return Status::Ok();
  }

  void copy_kv_block(model::KvPool* /*kv*/, int src, int dst) override {
    // A copy of a never-written block is a never-written block (reading it is an error), not
    // whatever dst held before.
    if (blocks_.count(src)) {
      blocks_[dst] = blocks_[src];
    } else {
      blocks_.erase(dst);
    }
  }

  // Its "K/V" of a block are the block_tokens token ids it wrote there (-1: never written).
  size_t kv_block_bytes(const model::KvPool* /*kv*/) const override {
    return sizeof(int32_t) * block_tokens_;
  }
  void save_kv_block(const model::KvPool* /*kv*/, int block, uint8_t* data) const override {
    std::vector<int32_t> cells(block_tokens_, -1);
    if (auto it = blocks_.find(block); it != blocks_.end()) cells = it->second;
    std::memcpy(data, cells.data(), sizeof(int32_t) * block_tokens_);
  }
  void load_kv_block(model::KvPool* /*kv*/, int block, const uint8_t* data) override {
    std::vector<int32_t>& b = blocks_[block];
    b.resize(block_tokens_);
    std::memcpy(b.data(), data, sizeof(int32_t) * block_tokens_);
  }

 private:
  int32_t& cell(int block, int offset) {
    std::vector<int32_t>& b = blocks_[block];
    if (b.empty()) b.assign(block_tokens_, -1);
    return b[offset];
  }

  model::Config config_;
  int block_tokens_;
  std::unordered_map<int, std::vector<int32_t>> blocks_;
  std::vector<int32_t> never_;
  float copy_bias_ = 0;
  std::atomic<int64_t> delay_us_{0};
  std::atomic<int64_t> token_delay_us_{0};
  std::atomic<int64_t> n_forward_{0};
  std::atomic<int64_t> n_tokens_run_{0};
  std::atomic<int64_t> max_batch_seen_{0};
};

// Greedy continuation of `prompt` by FakeModel without any cache: the expected output.
inline std::vector<int32_t> fake_greedy(std::vector<int32_t> context, int n_vocab, int max_tokens,
                                        const std::vector<int32_t>& stop_ids,
                                        const std::vector<int32_t>& never = {},
                                        float copy_bias = 0) {
  std::vector<int32_t> out;
  std::vector<float> logits(n_vocab);
  for (int i = 0; i < max_tokens; ++i) {
    FakeModel::logits_for(context, n_vocab, logits.data(), copy_bias);
    for (int32_t id : never) logits[id] = -1e9f;
    int32_t best = 0;
    for (int v = 1; v < n_vocab; ++v) {
      if (logits[v] > logits[best]) best = v;
    }
    bool stop = false;
    for (int32_t s : stop_ids) stop |= s == best;
    if (stop) break;
    out.push_back(best);
    context.push_back(best);
  }
  return out;
}

}  // namespace glm::testing
