// FakeModel: a deterministic stand-in for model::Model in scheduler and engine tests (in the
// spirit of mlc-llm's mock engine). Header-only, test use only.
//
// It behaves like a real model where the scheduler can get things wrong: forward() writes each
// input token into its own "KV cache" cell (block, offset) through the sequence's block table and
// computes the logits of the last position from the WHOLE context read back through that table.
// So a wrong block table, a reused block with the wrong content, a wrong n_past or a position
// never written changes the output or returns an error, exactly where a real model would produce
// garbage. Logits are a pseudo-random function of the context: logits[v] = g(hash(context), v).
// With set_mtp() it also has an MTP block (Model::has_mtp): forward() writes each position's
// "hidden row" (its context hash, 16 bits a value), and forward_mtp() extends a row's hash by
// its token, giving the target's own logits there (an exact drafter) or, with noise, logits that
// often differ; its cells check that each position's row is the hash the previous position
// ended with (rows paired with the wrong token or position are an error, as they would be
// garbage for a real block).
// Thread-safety: none (called from the scheduler loop only). Counts its forward calls.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/thread_pool.h"
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
  // Gives the model an MTP block (see above): noise 0 drafts the target's tokens; noise > 0
  // adds a pseudo-random [0, noise) to each of its logits.
  void set_mtp(float noise) {
    mtp_ = true;
    mtp_noise_ = noise;
  }
  // The MTP block fails every call from now on (a drafter that breaks).
  void set_mtp_fails(bool fails) { mtp_fails_ = fails; }
  // Sleeps this long in every forward_mtp (its cost against set_delay's forward).
  void set_mtp_delay(std::chrono::microseconds d) { mtp_delay_us_ = d.count(); }
  int64_t n_mtp_forward() const { return n_mtp_forward_; }
  int64_t n_forward() const { return n_forward_; }
  // Tokens run through forward() so far (prompt and decode): counts prefill work.
  int64_t n_tokens_run() const { return n_tokens_run_; }
  int64_t max_batch_seen() const { return max_batch_seen_; }
  // Lends a pool of n threads as the model's host threads (Model::host_threads), as a real
  // model lends its CPU kernels' pool; none before this is called.
  void set_host_threads(int n) { host_pool_ = std::make_unique<kernels::ThreadPool>(n); }
  kernels::ThreadPool* host_threads() override {
    if (host_pool_ != nullptr) ++n_host_threads_lent_;
    return host_pool_.get();
  }
  // How many times host_threads() lent the pool.
  int64_t n_host_threads_lent() const { return n_host_threads_lent_; }

  // The logits this model gives after `context` (for the tests' expectations).
  static void logits_for(const std::vector<int32_t>& context, int n_vocab, float* out,
                         float copy_bias = 0) {
    uint64_t h = kHashStart;
    for (int32_t t : context) h = extend(h, t);
    logits_of_hash(h, n_vocab, out);
    const int n = static_cast<int>(context.size());
    for (int m = n - 2; copy_bias != 0 && m >= 0; --m) {
      if (context[m] == context[n - 1]) {
        out[context[m + 1]] += copy_bias;
        break;
      }
    }
  }
  static constexpr uint64_t kHashStart = 1469598103934665603ull;
  static uint64_t extend(uint64_t h, int32_t t) {
    return (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  }
  static void logits_of_hash(uint64_t h, int n_vocab, float* out) {
    for (int v = 0; v < n_vocab; ++v) {
      uint64_t x = h + 0x9e3779b97f4a7c15ull * (v + 1);
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 29;
      out[v] = static_cast<float>(x % 10007) / 1000.0f;
    }
  }
  // A context hash as a hidden row (4 values of 16 bits: exact in floats) and back.
  static void encode(uint64_t h, float* row) {
    for (int i = 0; i < 4; ++i) row[i] = static_cast<float>((h >> (16 * i)) & 0xffff);
  }
  static uint64_t decode(const float* row) {
    uint64_t h = 0;
    for (int i = 0; i < 4; ++i) h |= static_cast<uint64_t>(row[i]) << (16 * i);
    return h;
  }

  bool has_mtp() const override { return mtp_; }
  Status forward_mtp(const std::vector<model::MtpInput>& batch, model::KvPool* /*kv*/,
                     std::vector<float>* logits, std::vector<float>* hidden) override {
    ++n_mtp_forward_;
    if (!mtp_ || mtp_fails_) return Status(ErrorCode::kInternal, "fake MTP block failed");
    if (mtp_delay_us_ > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(mtp_delay_us_.load()));
    }
    const int nv = config_.n_vocab, d = config_.n_embd;
    std::vector<float> rows, hrows;
    for (const model::MtpInput& in : batch) {
      const model::SeqInput& s = in.seq;
      if (s.n_tokens <= 0 || s.n_blocks * block_tokens_ < s.n_past + s.n_tokens) {
        return invalid_argument("fake MTP: blocks do not cover the positions");
      }
      uint64_t out_hash = 0;
      for (int i = 0; i < s.n_tokens; ++i) {
        const int pos = s.n_past + i;
        const uint64_t in_hash = decode(in.hidden + static_cast<size_t>(i) * d);
        if (pos > 0) {  // the row must continue the previous position's context
          const uint64_t prev =
              mtp_cell(s.blocks[(pos - 1) / block_tokens_], (pos - 1) % block_tokens_);
          if (prev == 0) return invalid_argument("fake MTP: reads a position never written");
          if (prev != in_hash) {
            return invalid_argument("fake MTP: a hidden row that does not follow position " +
                                    std::to_string(pos - 1));
          }
        }
        out_hash = extend(in_hash, s.tokens[i]);
        mtp_cell(s.blocks[pos / block_tokens_], pos % block_tokens_) = out_hash;
      }
      if (!in.output) continue;
      const size_t at = rows.size();
      rows.resize(at + nv);
      logits_of_hash(out_hash, nv, rows.data() + at);
      for (int v = 0; mtp_noise_ > 0 && v < nv; ++v) {
        uint64_t x = (out_hash ^ 0x5bd1e995ull) + 0x9e3779b97f4a7c15ull * (v + 7);
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull;
        rows[at + v] += mtp_noise_ * static_cast<float>(x % 1000) / 1000.0f;
      }
      for (int32_t id : never_) rows[at + id] = -1e9f;
      hrows.resize(hrows.size() + d, 0.0f);
      encode(out_hash, hrows.data() + hrows.size() - d);
    }
    logits->insert(logits->end(), rows.begin(), rows.end());
    hidden->insert(hidden->end(), hrows.begin(), hrows.end());
    return Status::Ok();
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
      if (in.hidden_out != nullptr) {  // each position's row: its context's hash
        if (!mtp_) return invalid_argument("fake model: hidden rows asked of a model without MTP");
        uint64_t h = kHashStart;
        for (int pos = 0; pos < end; ++pos) {
          h = extend(h, context[pos]);
          if (pos < in.n_past) continue;
          float* row = in.hidden_out + static_cast<size_t>(pos - in.n_past) * config_.n_embd;
          std::fill(row, row + config_.n_embd, 0.0f);
          encode(h, row);
        }
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
  std::unique_ptr<kernels::ThreadPool> host_pool_;
  int64_t n_host_threads_lent_ = 0;
  uint64_t& mtp_cell(int block, int offset) {
    std::vector<uint64_t>& b = mtp_blocks_[block];
    if (b.empty()) b.assign(block_tokens_, 0);
    return b[offset];
  }
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
  bool mtp_ = false;
  float mtp_noise_ = 0;
  bool mtp_fails_ = false;
  std::unordered_map<int, std::vector<uint64_t>> mtp_blocks_;  // per MTP block: its hashes
  std::atomic<int64_t> delay_us_{0};
  std::atomic<int64_t> token_delay_us_{0};
  std::atomic<int64_t> mtp_delay_us_{0};
  std::atomic<int64_t> n_forward_{0};
  std::atomic<int64_t> n_mtp_forward_{0};
  std::atomic<int64_t> n_tokens_run_{0};
  std::atomic<int64_t> max_batch_seen_{0};
};

// The vocabulary most tests give a FakeModel: 64 ids, 1 the end of sequence.
inline constexpr int kVocab = 64;
inline constexpr int32_t kEos = 1;

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
