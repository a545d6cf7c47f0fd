// GLM-4.5's multi-token-prediction block (nextn) as a speculative drafter (--spec mtp), on
// `gen-model --arch glm4moe --preset tiny` files, which carry one as GLM-4.5's files do:
// - the block's logits and head-normed rows against a scalar reference written here from the
//   definition (llama.cpp d32676d77 loads the nextn tensors but runs no glm4moe MTP graph, so
//   no outside implementation can be run here): [enorm(embedding); hnorm(hidden)] through
//   eh_proj, one MoE layer over its own positions, the head norm and head; in one batch, a
//   position at a time, and beside another sequence;
// - the trunk's hidden rows (SeqInput::hidden_out) equal the final-norm rows eval prints;
// - greedy text with --spec mtp equals --spec off, alone and batched, and drafts are made;
// - a file built so that the block must predict what the trunk will say has every draft
//   accepted (the chain's positions and rows paired right in the real model);
// - a trunk-only file (gen-model --no-mtp) loads with the same logits and refuses --spec mtp;
// - on the GPU (lavapipe in CI): the hidden rows and the block's outputs equal the CPU's, the
//   greedy text with drafts equals without, and the exact block has every draft accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "convert/gen_model.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "gpu/device.h"
#include "llama_reference.h"
#include "model/config.h"
#include "model/eval.h"
#include "model/gpu_test_util.h"
#include "model/moe.h"
#include "model/test_util.h"

namespace glm {
namespace {

std::string tiny(DType type) {
  return glm::testing::tiny_model("glm4moe-tiny", convert::Family::kGLM4MoE, type);
}

// GLM-4.5's (355B) attention at the tiny width: its MTP block normalises each q and k head too.
std::string tiny_355b() {
  return glm::testing::tiny_model("glm4moe-tiny-355b", convert::Family::kGLM4MoE, DType::kF32,
                                  "tiny-355b");
}

// A tensor of an f32 file as floats.
std::vector<float> floats(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  EXPECT_EQ(t->type, DType::kF32) << name;
  std::vector<float> v(t->n_elements());
  std::memcpy(v.data(), t->data, v.size() * sizeof(float));
  return v;
}

// y [rows] = W x for W [rows, cols] row-major (GGUF {cols, rows}), from row `first` of W.
std::vector<double> matvec(const std::vector<float>& w, size_t rows, size_t cols,
                           const std::vector<double>& x, size_t first = 0) {
  std::vector<double> y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += w[(first + r) * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> rms(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double k = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * k * w[i];
  return y;
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// The MTP block of the tiny f32 file, computed in doubles from its tensors: per position j (of
// one sequence), token tokens[j] paired with hidden row hidden[j]; returns each position's
// logits and head-normed row.
struct RefOut {
  std::vector<std::vector<double>> logits, rows;
};
RefOut reference(const gguf::File& f, const model::Config& c, const std::vector<int32_t>& tokens,
                 const std::vector<std::vector<float>>& hidden) {
  const size_t d = c.n_embd, hd = c.head_dim, nh = c.n_head, nkv = c.n_head_kv;
  const size_t qd = nh * hd, kd = nkv * hd, nv = c.n_vocab;
  const std::string b = "blk." + std::to_string(c.n_layer) + ".";
  auto t = [&](const std::string& n) { return floats(f, b + n); };
  const auto embed = t("nextn.embed_tokens.weight"), head = t("nextn.shared_head_head.weight");
  const auto eh = t("nextn.eh_proj.weight"), enorm = t("nextn.enorm.weight");
  const auto hnorm = t("nextn.hnorm.weight"), head_norm = t("nextn.shared_head_norm.weight");
  const auto attn_norm = t("attn_norm.weight"), ffn_norm = t("post_attention_norm.weight");
  const auto wq = t("attn_q.weight"), wk = t("attn_k.weight"), wv = t("attn_v.weight");
  const auto bq = t("attn_q.bias"), bk = t("attn_k.bias"), bv = t("attn_v.bias");
  const auto wo = t("attn_output.weight"), router = t("ffn_gate_inp.weight");
  const auto bias = t("exp_probs_b.bias");
  const auto gate = t("ffn_gate_exps.weight"), up = t("ffn_up_exps.weight");
  const auto down = t("ffn_down_exps.weight");
  const auto gate_s = t("ffn_gate_shexp.weight"), up_s = t("ffn_up_shexp.weight");
  const auto down_s = t("ffn_down_shexp.weight");
  const size_t ff = c.moe.n_ff_exp, ffs = gate_s.size() / d;
  const double eps = c.norm_eps;
  const size_t n = tokens.size();
  std::vector<std::vector<double>> u(n), ks(n), vs(n), qs(n);
  RefOut out;
  for (size_t j = 0; j < n; ++j) {
    std::vector<double> e(embed.begin() + tokens[j] * d, embed.begin() + (tokens[j] + 1) * d);
    std::vector<double> h(hidden[j].begin(), hidden[j].end());
    std::vector<double> cat = rms(e, enorm, eps);
    const std::vector<double> hn = rms(h, hnorm, eps);
    cat.insert(cat.end(), hn.begin(), hn.end());
    u[j] = matvec(eh, d, 2 * d, cat);
    const std::vector<double> a = rms(u[j], attn_norm, eps);
    qs[j] = matvec(wq, qd, d, a);
    ks[j] = matvec(wk, kd, d, a);
    vs[j] = matvec(wv, kd, d, a);
    for (size_t i = 0; i < qd; ++i) qs[j][i] += bq[i];
    for (size_t i = 0; i < kd; ++i) ks[j][i] += bk[i], vs[j][i] += bv[i];
    if (f.tensor(b + "attn_q_norm.weight") != nullptr) {  // GLM-4.5: each head RMS-normed
      const auto q_norm = t("attn_q_norm.weight"), k_norm = t("attn_k_norm.weight");
      auto norm_heads = [&](std::vector<double>* x, size_t heads, const std::vector<float>& w) {
        for (size_t hh = 0; hh < heads; ++hh) {
          const std::vector<double> head(x->begin() + hh * hd, x->begin() + (hh + 1) * hd);
          const std::vector<double> normed = rms(head, w, eps);
          std::copy(normed.begin(), normed.end(), x->begin() + hh * hd);
        }
      };
      norm_heads(&qs[j], nh, q_norm);
      norm_heads(&ks[j], nkv, k_norm);
    }
    // NEOX rotary on the first n_rot dims of each head: pairs (i, i + n_rot / 2).
    const size_t half = c.n_rot / 2;
    auto rope = [&](std::vector<double>* x, size_t heads) {
      for (size_t hh = 0; hh < heads; ++hh) {
        for (size_t i = 0; i < half; ++i) {
          const double theta = j * std::pow(static_cast<double>(c.rope_base), -2.0 * i / c.n_rot);
          double& x0 = (*x)[hh * hd + i];
          double& x1 = (*x)[hh * hd + i + half];
          const double a0 = x0, a1 = x1;
          x0 = a0 * std::cos(theta) - a1 * std::sin(theta);
          x1 = a0 * std::sin(theta) + a1 * std::cos(theta);
        }
      }
    };
    rope(&qs[j], nh);
    rope(&ks[j], nkv);
    std::vector<double> att(qd, 0.0);
    for (size_t hh = 0; hh < nh; ++hh) {
      const size_t kh = hh / (nh / nkv);
      std::vector<double> s(j + 1);
      double mx = -1e300;
      for (size_t p = 0; p <= j; ++p) {
        double dot = 0;
        for (size_t i = 0; i < hd; ++i) dot += qs[j][hh * hd + i] * ks[p][kh * hd + i];
        s[p] = dot / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, s[p]);
      }
      double sum = 0;
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (size_t p = 0; p <= j; ++p) {
        for (size_t i = 0; i < hd; ++i) att[hh * hd + i] += s[p] / sum * vs[p][kh * hd + i];
      }
    }
    std::vector<double> r = matvec(wo, d, qd, att);
    for (size_t i = 0; i < d; ++i) r[i] += u[j][i];
    const std::vector<double> x = rms(r, ffn_norm, eps);
    // The shared expert, then each routed expert (route_token: the router's scalar reference).
    auto swiglu = [&](const std::vector<float>& g, const std::vector<float>& up_w,
                      const std::vector<float>& dn, size_t width, size_t e) {
      std::vector<double> gv = matvec(g, width, d, x, e * width);
      const std::vector<double> uv = matvec(up_w, width, d, x, e * width);
      for (size_t i = 0; i < width; ++i) gv[i] = silu(gv[i]) * uv[i];
      return matvec(dn, d, width, gv, e * d);
    };
    std::vector<double> y = swiglu(gate_s, up_s, down_s, ffs, 0);
    const std::vector<double> logits_r = matvec(router, c.moe.n_expert, d, x);
    std::vector<float> lr(logits_r.begin(), logits_r.end());
    const model::Route route = model::route_token(lr.data(), bias.data(), c);
    for (size_t k = 0; k < route.experts.size(); ++k) {
      const std::vector<double> ye = swiglu(gate, up, down, ff, route.experts[k]);
      for (size_t i = 0; i < d; ++i) y[i] += route.weights[k] * ye[i];
    }
    for (size_t i = 0; i < d; ++i) r[i] += y[i];
    out.rows.push_back(rms(r, head_norm, eps));
    out.logits.push_back(matvec(head, nv, d, out.rows.back()));
  }
  return out;
}

// The trunk's final-norm rows of `tokens` (eval's hidden output).
std::vector<std::vector<float>> trunk_rows(model::Model& m, const std::vector<int32_t>& tokens) {
  model::EvalOptions o;
  o.output = model::OutputKind::kHidden;
  auto rows = model::evaluate(m, tokens, {}, o);
  EXPECT_TRUE(rows.ok()) << rows.status().to_string();
  std::vector<std::vector<float>> out;
  if (rows.ok()) {
    for (const auto& r : *rows) out.push_back(r.values);
  }
  return out;
}

// A sequence's part of a forward_mtp batch: n tokens from position n_past, in the first block
// of `blocks`, paired with the rows at `hidden` ([n, n_embd]).
model::MtpInput mtp_input(const int32_t* tokens, int n, int n_past,
                          const std::vector<int32_t>& blocks, const float* hidden,
                          bool output = true) {
  model::MtpInput in;
  in.seq.tokens = tokens;
  in.seq.n_tokens = n;
  in.seq.n_past = n_past;
  in.seq.blocks = blocks.data();
  in.seq.n_blocks = 1;
  in.hidden = hidden;
  in.output = output;
  return in;
}

void expect_mtp_block_equals_scalar_reference(const std::string& path) {
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok());
  auto m = model::testing::load(path, 2);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  model::Model& model = **m;
  ASSERT_TRUE(model.has_mtp());
  const model::Config& c = model.config();
  const std::vector<int32_t> x = {17, 300, 5, 211, 42, 7, 150, 99, 1, 498, 400, 64, 3, 255};
  const auto h = trunk_rows(model, x);
  ASSERT_EQ(h.size(), x.size());
  // MTP position j: the trunk's row of position j with token j + 1.
  const std::vector<int32_t> tok(x.begin() + 1, x.end());
  const std::vector<std::vector<float>> hid(h.begin(), h.end() - 1);
  const RefOut ref = reference(**file, c, tok, hid);
  const int n = static_cast<int>(tok.size());

  model::KvPool pool(model::mtp_kv_config(c), 8, 16, DType::kF32);
  const std::vector<int32_t> blocks = {0, 1, 2, 3};
  double max_diff = 0, max_abs = 0;
  std::vector<float> logits, rows;
  for (int j = 0; j < n; ++j) {  // a position at a time, through the block's own K/V
    const model::MtpInput in = mtp_input(&tok[j], 1, j, blocks, hid[j].data());
    logits.clear();
    rows.clear();
    ASSERT_TRUE(model.forward_mtp({in}, &pool, &logits, &rows).ok());
    ASSERT_EQ(logits.size(), static_cast<size_t>(c.n_vocab));
    ASSERT_EQ(rows.size(), static_cast<size_t>(c.n_embd));
    for (int v = 0; v < c.n_vocab; ++v) {
      max_diff = std::max(max_diff, std::fabs(logits[v] - ref.logits[j][v]));
      max_abs = std::max(max_abs, std::fabs(ref.logits[j][v]));
    }
    for (int i = 0; i < c.n_embd; ++i) {
      ASSERT_NEAR(rows[i], ref.rows[j][i], 1e-3 * (1 + std::fabs(ref.rows[j][i]))) << j << " " << i;
    }
  }
  std::printf("MTP block vs reference: max |diff| %.3g of max |logit| %.3g\n", max_diff, max_abs);
  EXPECT_LT(max_diff, 2e-3 * (1 + max_abs));
  EXPECT_GT(max_abs, 0.05);  // logits that mean something

  // All positions in one call (the last's rows out), beside a second sequence of its own.
  std::vector<float> flat;
  for (const auto& r : hid) flat.insert(flat.end(), r.begin(), r.end());
  const std::vector<int32_t> other_tok = {9, 8, 7};
  const std::vector<int32_t> other_blocks = {4};
  model::KvPool pool2(model::mtp_kv_config(c), 8, 16, DType::kF32);
  const std::vector<model::MtpInput> batch = {
      mtp_input(tok.data(), n, 0, blocks, flat.data()),
      mtp_input(other_tok.data(), 3, 0, other_blocks, flat.data())};
  std::vector<float> l2, r2;
  ASSERT_TRUE(model.forward_mtp(batch, &pool2, &l2, &r2).ok());
  ASSERT_EQ(l2.size(), 2u * c.n_vocab);
  for (int v = 0; v < c.n_vocab; ++v) {
    ASSERT_NEAR(l2[v], logits[v], 1e-4f * (1 + std::fabs(logits[v]))) << v;
  }
  const RefOut other = reference(**file, c, other_tok, {hid[0], hid[1], hid[2]});
  for (int v = 0; v < c.n_vocab; ++v) {
    ASSERT_NEAR(l2[c.n_vocab + v], other.logits[2][v], 2e-3 * (1 + max_abs)) << v;
  }
}

TEST(Glm4MoeMtp, BlockEqualsAScalarReferenceInOneBatchAPositionAtATimeAndBesideAnother) {
  expect_mtp_block_equals_scalar_reference(tiny(DType::kF32));
}

TEST(Glm4MoeMtp, WithQkNormsTheBlockEqualsAScalarReference) {
  expect_mtp_block_equals_scalar_reference(tiny_355b());
}

// SeqInput::hidden_out (what the scheduler feeds the block) is eval's final-norm row of each
// position, in a prefill and in a decode step.
TEST(Glm4MoeMtp, TrunkHiddenRowsAreTheFinalNormRows) {
  auto m = model::testing::load(tiny(DType::kQ8_0), 2);
  ASSERT_TRUE(m.ok());
  model::Model& model = **m;
  const std::vector<int32_t> x = {17, 300, 5, 211, 42, 7, 150, 99, 1, 498};
  const auto want = trunk_rows(model, x);
  const int d = model.config().n_embd;
  model::KvPool pool(model.config(), 4, 16, DType::kF32);
  const std::vector<int32_t> blocks = {0};
  std::vector<float> got(x.size() * d), logits;
  model::SeqInput in;
  in.tokens = x.data();
  in.n_tokens = 7;
  in.blocks = blocks.data();
  in.n_blocks = 1;
  in.hidden_out = got.data();
  ASSERT_TRUE(model.forward({in}, &pool, &logits).ok());
  for (int t = 7; t < 10; ++t) {  // decode steps
    in.tokens = &x[t];
    in.n_tokens = 1;
    in.n_past = t;
    in.hidden_out = got.data() + static_cast<size_t>(t) * d;
    ASSERT_TRUE(model.forward({in}, &pool, &logits).ok());
  }
  for (size_t t = 0; t < x.size(); ++t) {
    for (int i = 0; i < d; ++i) {
      ASSERT_NEAR(got[t * d + i], want[t][i], 1e-4f * (1 + std::fabs(want[t][i]))) << t << " " << i;
    }
  }
}

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> text;
  std::map<std::string, engine::Event> done;
  engine::EventSink sink() {
    return [this](const engine::Event& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (e.type == engine::EventType::kToken) text[e.id] += e.text;
      if (e.type == engine::EventType::kDone || e.type == engine::EventType::kError) {
        done[e.id] = e;
      }
      cv.notify_all();
    };
  }
};

StatusOr<std::unique_ptr<engine::Engine>> load_engine(const std::string& path,
                                                      generation::SpecMode spec,
                                                      bool draft_cost = true,
                                                      const std::string& device = "cpu",
                                                      int cpu_moe = 0) {
  engine::Options o;
  o.device = device;
  o.cpu_moe = cpu_moe;
  o.draft_cost = draft_cost;
  o.model_path = path;
  o.n_threads = 2;
  o.n_ctx = 512;
  o.max_batch = 4;
  o.prefill_chunk = 8;  // prompts over several steps: the block is fed as they go
  o.max_stall_ms = 0;
  o.spec = spec;
  return engine::load_engine(o);
}

// Requests run together (ids `prefix`0, `prefix`1, ...; greedy unless `temperature` > 0, then
// sampled with seed 11); each one's text and done event.
std::map<std::string, std::pair<std::string, engine::Event>> run(
    engine::Engine* e, const std::vector<std::string>& prompts, int n, const std::string& prefix,
    float temperature = 0.0f) {
  Collected c;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::Request r;
    r.id = prefix + std::to_string(i);
    r.raw = true;
    r.prompt = prompts[i];
    r.params.temperature = temperature;
    r.params.seed = 11;
    r.params.max_tokens = n;
    const Status st = e->submit(std::move(r), c.sink());
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  std::map<std::string, std::pair<std::string, engine::Event>> out;
  std::unique_lock<std::mutex> lock(c.mu);
  EXPECT_TRUE(c.cv.wait_for(lock, std::chrono::seconds(300),
                            [&] { return c.done.size() == prompts.size(); }));
  for (const auto& [id, ev] : c.done) {
    EXPECT_EQ(ev.type, engine::EventType::kDone) << ev.error.to_string();
    out[id] = {c.text[id], ev};
  }
  return out;
}

const std::vector<std::string> kPrompts = {"hello world, this is a test of the block",
                                           "a b c d e f g h i j k l m n o p",
                                           "Once upon a time there was"};

TEST(Glm4MoeMtp, GreedyTextWithMtpDraftsEqualsWithoutAloneAndBatched) {
  for (DType type : {DType::kF32, DType::kQ8_0}) {
    std::map<generation::SpecMode, std::map<std::string, std::pair<std::string, engine::Event>>>
        got;
    for (auto mode : {generation::SpecMode::kOff, generation::SpecMode::kMtp}) {
      auto e = load_engine(tiny(type), mode);
      ASSERT_TRUE(e.ok()) << e.status().to_string();
      for (size_t i = 0; i < kPrompts.size(); ++i) {  // alone
        const std::string id = "a" + std::to_string(i);
        got[mode][id] = run(e->get(), {kPrompts[i]}, 48, id + ".")[id + ".0"];
      }
      for (auto& [id, r] : run(e->get(), kPrompts, 48, "b")) got[mode][id] = r;
    }
    int64_t drafted = 0;
    for (const auto& [id, r] : got[generation::SpecMode::kOff]) {
      EXPECT_EQ(got[generation::SpecMode::kMtp][id].first, r.first)
          << id << " " << dtype_name(type);
      EXPECT_FALSE(r.first.empty()) << id;
      drafted += got[generation::SpecMode::kMtp][id].second.speculation.drafted;
    }
    EXPECT_GT(drafted, 0) << dtype_name(type);
  }
}

// Sampled answers with MTP drafts on the real block (its q from real logits, verified by
// speculative sampling): they end normally with their tokens, drafts are made, and with draft
// lengths that do not follow timings a seed gives the same text alone and batched.
TEST(Glm4MoeMtp, SampledAnswersWithMtpDraftsEndWellAndASeedRepeats) {
  // Each on an engine of its own: a prompt found in the cache has no hidden rows for the block,
  // which then drafts from fewer positions (other drafts, so other draws; docs/engine.md).
  auto e = load_engine(tiny(DType::kF32), generation::SpecMode::kMtp, /*draft_cost=*/false);
  auto e2 = load_engine(tiny(DType::kF32), generation::SpecMode::kMtp, /*draft_cost=*/false);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_TRUE(e2.ok()) << e2.status().to_string();
  const auto alone = run(e->get(), {kPrompts[0]}, 40, "a", 0.9f);
  const auto batched = run(e2->get(), kPrompts, 40, "b", 0.9f);
  const engine::Event& done = alone.at("a0").second;
  EXPECT_GT(done.usage.completion_tokens, 0);
  EXPECT_LE(done.usage.completion_tokens, 40);
  if (done.finish_reason == generation::FinishReason::kLength) {
    EXPECT_EQ(done.usage.completion_tokens, 40);
  }
  EXPECT_FALSE(alone.at("a0").first.empty());
  EXPECT_EQ(batched.at("b0").first, alone.at("a0").first);
  int64_t drafted = done.speculation.drafted;
  for (const auto& [id, r] : batched) drafted += r.second.speculation.drafted;
  EXPECT_GT(drafted, 0);
}

// The block made to predict what the trunk will say: every trunk layer's and the block's
// layer's outputs zero (wo and the FFNs' down projections), so the trunk's next token is a
// function of its last token (argmax of output . norm(embedding)); the block's eh_proj passes
// the token's normed embedding through ([I 0]) to the same head and norm, so it predicts the
// token after the next exactly, chained drafts too. Every draft is accepted, several a step.
void expect_every_draft_of_an_exact_block_accepted(const std::string& device) {
  const std::string src = tiny(DType::kF32);
  auto f = gguf::File::open(src);
  ASSERT_TRUE(f.ok());
  const int d = static_cast<int>((*f)->tensor("token_embd.weight")->shape[0]);
  std::map<std::string, std::vector<uint8_t>> same;  // the trunk's tensors the block reuses
  for (const char* n : {"token_embd.weight", "output.weight", "output_norm.weight"}) {
    const gguf::TensorInfo* t = (*f)->tensor(n);
    same[n].assign(t->data, t->data + t->n_bytes);
  }
  auto edit = [&](const std::string& name, std::vector<uint8_t>* b) {
    auto ends = [&](const char* s) {
      return name.size() >= std::strlen(s) &&
             name.compare(name.size() - std::strlen(s), std::strlen(s), s) == 0;
    };
    float* v = reinterpret_cast<float*>(b->data());
    const size_t n = b->size() / sizeof(float);
    if (ends("attn_output.weight") || ends("ffn_down.weight") || ends("ffn_down_exps.weight") ||
        ends("ffn_down_shexp.weight")) {
      std::fill(v, v + n, 0.0f);
    } else if (ends("nextn.eh_proj.weight")) {  // [d, 2d]: row i picks embedding value i
      std::fill(v, v + n, 0.0f);
      for (int i = 0; i < d; ++i) v[static_cast<size_t>(i) * 2 * d + i] = 1.0f;
    } else if (ends("nextn.enorm.weight")) {
      std::fill(v, v + n, 1.0f);
    } else if (ends("nextn.embed_tokens.weight")) {
      *b = same["token_embd.weight"];
    } else if (ends("nextn.shared_head_head.weight")) {
      *b = same["output.weight"];
    } else if (ends("nextn.shared_head_norm.weight")) {
      *b = same["output_norm.weight"];
    }
  };
  const std::string path =
      glm::testing::edited_copy(src, "glm4moe-mtp-exact.gguf", nullptr, "", edit);
  // Off; MTP with drafts taken as free (as long as acceptance allows); MTP as the engine runs
  // it, draft lengths by measured cost (on this tiny shape a pass costs much of a step).
  std::vector<std::map<std::string, std::pair<std::string, engine::Event>>> got;
  for (int run_i = 0; run_i < 3; ++run_i) {
    auto e = load_engine(path, run_i == 0 ? generation::SpecMode::kOff : generation::SpecMode::kMtp,
                         /*draft_cost=*/run_i == 2, device);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    got.push_back(run(e->get(), kPrompts, 40, "r"));
  }
  for (int run_i = 1; run_i < 3; ++run_i) {
    generation::Speculation s;
    for (const auto& [id, r] : got[0]) {
      EXPECT_EQ(got[run_i][id].first, r.first) << id << " run " << run_i;
      const generation::Speculation& one = got[run_i][id].second.speculation;
      s.drafted += one.drafted;
      s.accepted += one.accepted;
    }
    std::printf("exact block on %s (%s): drafted %lld, accepted %lld\n", device.c_str(),
                run_i == 1 ? "free drafts" : "measured cost", static_cast<long long>(s.drafted),
                static_cast<long long>(s.accepted));
    EXPECT_EQ(s.accepted, s.drafted) << run_i;
    EXPECT_GT(s.drafted, run_i == 1 ? 60 : 2) << run_i;  // free: most of 3 x 40 tokens drafted
  }
}

TEST(Glm4MoeMtp, ABlockThatKnowsTheTrunkHasEveryDraftAccepted) {
  expect_every_draft_of_an_exact_block_accepted("cpu");
}

TEST(Glm4MoeMtp, ATrunkOnlyFileHasTheSameLogitsAndRefusesSpecMtp) {
  convert::GenOptions o;
  o.family = convert::Family::kGLM4MoE;
  o.type = DType::kF32;
  o.seed = 7;
  o.mtp = false;
  const std::string trunk = model::testing::temp_path("glm4moe-trunk-only.gguf");
  ASSERT_TRUE(convert::generate_model(o, trunk, nullptr).ok());
  const std::vector<int32_t> x = {17, 300, 5, 211, 42};
  std::vector<std::vector<float>> out[2];
  int i = 0;
  for (const std::string& path : {tiny(DType::kF32), trunk}) {
    auto m = model::testing::load(path, 2);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ((*m)->has_mtp(), i == 0);
    auto rows = model::evaluate(**m, x, {3}, model::EvalOptions());
    ASSERT_TRUE(rows.ok());
    for (const auto& r : *rows) out[i].push_back(r.values);
    ++i;
  }
  EXPECT_EQ(out[0], out[1]);
  auto e = load_engine(trunk, generation::SpecMode::kMtp);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("no multi-token-prediction block"), std::string::npos)
      << e.status().message();
}

// On the GPU: the model loaded as the engine loads it for --spec mtp (the block uploaded).
StatusOr<std::unique_ptr<model::Model>> load_gpu_with_block(const std::string& path) {
  return model::testing::load_on_gpu(path, -1, /*mtp_kv_bytes=*/1 << 20);
}

// The trunk's hidden rows (a prefill and decode steps) and the block's logits and head-normed
// rows (a position at a time, then one batch beside another sequence) on the GPU equal the
// CPU's, which the reference test above checks from the definition.
void expect_gpu_hidden_rows_and_mtp_block_equal_the_cpus(const std::string& path) {
  auto cpu = model::testing::load(path, 2);
  auto gpu = load_gpu_with_block(path);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  ASSERT_TRUE((*gpu)->has_mtp());
  const model::Config& c = (*cpu)->config();
  const int d = c.n_embd;
  const std::vector<int32_t> x = {17, 300, 5, 211, 42, 7, 150, 99, 1, 498, 400, 64, 3, 255};
  const auto want = trunk_rows(**cpu, x);
  auto close = [](const std::vector<float>& got, const std::vector<float>& want, float tol,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " " << i;
    }
  };
  // hidden_out: 11 tokens in one step, then three decode steps.
  model::KvPool pool((*gpu)->config(), 4, 16, DType::kF32);
  const std::vector<int32_t> blocks = {0};
  std::vector<float> hid(x.size() * d), logits;
  model::SeqInput in;
  in.tokens = x.data();
  in.n_tokens = 11;
  in.blocks = blocks.data();
  in.n_blocks = 1;
  in.hidden_out = hid.data();
  ASSERT_TRUE((*gpu)->forward({in}, &pool, &logits).ok());
  for (int t = 11; t < 14; ++t) {
    in.tokens = &x[t];
    in.n_tokens = 1;
    in.n_past = t;
    in.hidden_out = hid.data() + static_cast<size_t>(t) * d;
    ASSERT_TRUE((*gpu)->forward({in}, &pool, &logits).ok());
  }
  for (size_t t = 0; t < x.size(); ++t) {
    close(std::vector<float>(hid.begin() + t * d, hid.begin() + (t + 1) * d), want[t], 1e-4f,
          "hidden row " + std::to_string(t));
  }
  // The block: MTP position j pairs the trunk's row j with token j + 1.
  const std::vector<int32_t> tok(x.begin() + 1, x.end());
  const int n = static_cast<int>(tok.size());
  std::vector<float> flat;
  for (int j = 0; j < n; ++j) flat.insert(flat.end(), want[j].begin(), want[j].end());
  const std::vector<int32_t> mblocks = {0, 1, 2, 3}, other_blocks = {4};
  const std::vector<int32_t> other_tok = {9, 8, 7};
  std::vector<float> out[2][2];  // [cpu, gpu][logits, rows]
  for (int k = 0; k < 2; ++k) {
    model::Model& m = k == 0 ? **cpu : **gpu;
    model::KvPool mp(model::mtp_kv_config(c), 8, 16, DType::kF32);
    for (int j = 0; j < n; ++j) {  // a position at a time
      ASSERT_TRUE(m.forward_mtp({mtp_input(&tok[j], 1, j, mblocks, want[j].data())}, &mp,
                                &out[k][0], &out[k][1])
                      .ok());
    }
    // All at once beside a second sequence whose output is not asked (its K/V only), then one
    // that is.
    model::KvPool mp2(model::mtp_kv_config(c), 8, 16, DType::kF32);
    ASSERT_TRUE(m.forward_mtp({mtp_input(tok.data(), n, 0, mblocks, flat.data()),
                               mtp_input(other_tok.data(), 2, 0, other_blocks, flat.data(),
                                         /*output=*/false)},
                              &mp2, &out[k][0], &out[k][1])
                    .ok());
    ASSERT_TRUE(m.forward_mtp({mtp_input(&other_tok[2], 1, 2, other_blocks, flat.data() + 2 * d)},
                              &mp2, &out[k][0], &out[k][1])
                    .ok());
    // A pass of catch-up alone (no row out: on the GPU no head), then its sequence's next.
    const std::vector<int32_t> third_blocks = {5};
    const size_t before = out[k][0].size();
    ASSERT_TRUE(m.forward_mtp({mtp_input(tok.data(), 2, 0, third_blocks, flat.data(), false)}, &mp2,
                              &out[k][0], &out[k][1])
                    .ok());
    ASSERT_EQ(out[k][0].size(), before);
    ASSERT_TRUE(m.forward_mtp({mtp_input(&tok[2], 1, 2, third_blocks, flat.data() + 2 * d)}, &mp2,
                              &out[k][0], &out[k][1])
                    .ok());
  }
  ASSERT_EQ(out[1][0].size(), static_cast<size_t>(n + 3) * c.n_vocab);
  close(out[1][0], out[0][0], 1e-4f, "MTP logits");
  close(out[1][1], out[0][1], 1e-4f, "MTP rows");
}

TEST(Glm4MoeMtp, OnTheGpuTheHiddenRowsAndTheBlockEqualTheCpus) {
  expect_gpu_hidden_rows_and_mtp_block_equal_the_cpus(tiny(DType::kF32));
}

TEST(Glm4MoeMtp, OnTheGpuWithQkNormsTheHiddenRowsAndTheBlockEqualTheCpus) {
  expect_gpu_hidden_rows_and_mtp_block_equal_the_cpus(tiny_355b());
}

void expect_gpu_greedy_text_with_mtp_drafts_equal_to_without(int cpu_moe) {
  std::map<generation::SpecMode, std::map<std::string, std::pair<std::string, engine::Event>>> got;
  for (auto mode : {generation::SpecMode::kOff, generation::SpecMode::kMtp}) {
    auto e = load_engine(tiny(DType::kF32), mode, true, "vulkan", cpu_moe);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ((*e)->device().substr(0, 7), "vulkan:");
    for (auto& [id, r] : run(e->get(), kPrompts, 32, "b")) got[mode][id] = r;
  }
  int64_t drafted = 0;
  for (const auto& [id, r] : got[generation::SpecMode::kOff]) {
    EXPECT_EQ(got[generation::SpecMode::kMtp][id].first, r.first) << id;
    EXPECT_FALSE(r.first.empty()) << id;
    drafted += got[generation::SpecMode::kMtp][id].second.speculation.drafted;
  }
  EXPECT_GT(drafted, 0);
}

TEST(Glm4MoeMtp, OnTheGpuGreedyTextWithMtpDraftsEqualsWithout) {
  expect_gpu_greedy_text_with_mtp_drafts_equal_to_without(0);
}

// The same with the trunk's routed experts in host memory (--cpu-moe all): each MoE layer's
// step submitted and read back mid-forward, the hidden rows the block takes still the trunk's
// (the MTP block's own experts stay on the device).
TEST(Glm4MoeMtp, OnTheGpuWithExpertsInHostMemoryGreedyTextWithDraftsEqualsWithout) {
  expect_gpu_greedy_text_with_mtp_drafts_equal_to_without(model::kAllLayers);
}

TEST(Glm4MoeMtp, OnTheGpuABlockThatKnowsTheTrunkHasEveryDraftAccepted) {
  expect_every_draft_of_an_exact_block_accepted("vulkan");
}

// The engine's warm-up at load covers the block (docs/gpu.md, "How it works"): the first
// request with MTP drafts, its prompt in steps and its decode steps with drafts verified,
// compiles no pipeline.
TEST(Glm4MoeMtp, OnTheGpuTheFirstRequestWithMtpDraftsCompilesNoShader) {
  auto e = load_engine(tiny(DType::kQ8_0), generation::SpecMode::kMtp, true, "vulkan");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_EQ((*e)->device().substr(0, 7), "vulkan:");
  const uint64_t warmed = gpu::Device::pipelines_created();
  const auto out = run(e->get(), {kPrompts[1]}, 24, "w");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_GT(out.begin()->second.second.speculation.drafted, 0);
  EXPECT_EQ(gpu::Device::pipelines_created(), warmed);
}

}  // namespace
}  // namespace glm
