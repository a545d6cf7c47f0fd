// LoRA adapters (model/lora.h): the side path against its scalar reference, per request against
// merged at load, a batch of several adapters against each sequence alone, the quality of a
// merge into quantized weights, and the errors of files that do not fit their base.
// (llama.cpp as the reference: tests/lora_reference_test.cc.)
#include "model/lora.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "model/eval.h"
#include "model/gpu_test_util.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

// Random pairs on every layer matrix of a testing::RandomSpec model, written as llama.cpp's
// LoRA GGUF (ggml shapes: lora_a {n_in, rank}, lora_b {rank, n_out}) with gguf::Writer.
struct LoraSpecForTest {
  int rank = 4;
  float alpha = 8.0f;
  uint32_t seed = 11;
  float std = 0.1f;
  std::string arch = "chatglm";
  // Fault injection: change a tensor's ggml shape, drop a tensor, rename one.
  std::function<void(const std::string&, std::vector<int64_t>*)> reshape;
  std::string drop;
  std::string extra;  // an extra tensor name (lora_a of a matrix the base may lack)
  std::string adapter_type = "lora";
};

Status write_lora(const std::string& base_path, const LoraSpecForTest& s, const std::string& path) {
  StatusOr<std::unique_ptr<gguf::File>> base = gguf::File::open(base_path);
  if (!base.ok()) return base.status();
  struct T {
    std::string name;
    std::vector<int64_t> shape;
  };
  std::vector<T> ts;
  for (const gguf::TensorInfo& t : (*base)->tensors()) {
    if (t.name.rfind("blk.", 0) != 0 || t.shape.size() != 2) continue;
    ts.push_back({t.name + ".lora_a", {t.shape[0], s.rank}});
    ts.push_back({t.name + ".lora_b", {s.rank, t.shape[1]}});
  }
  if (!s.extra.empty()) ts.push_back({s.extra, {64, s.rank}});
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string(s.arch));
  w.set("general.type", gguf::Value::string("adapter"));
  w.set("adapter.type", gguf::Value::string(s.adapter_type));
  w.set("adapter.lora.alpha", gguf::Value::f32(s.alpha));
  std::vector<T> kept;
  for (T t : ts) {
    if (t.name == s.drop) continue;
    if (s.reshape) s.reshape(t.name, &t.shape);
    w.add_tensor(t.name, DType::kF32, t.shape);
    kept.push_back(t);
  }
  GLM_RETURN_IF_ERROR(w.begin(path));
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, s.std);
  for (const T& t : kept) {
    std::vector<float> v(t.shape[0] * t.shape[1]);
    for (float& x : v) x = normal(rng);
    GLM_RETURN_IF_ERROR(w.write_tensor_data(v.data(), v.size() * sizeof(float)));
  }
  return w.finish();
}

std::string base_model(const std::string& name, DType type = DType::kF32,
                       const std::string& arch = "chatglm") {
  const std::string path = testing::temp_path(name + ".gguf");
  if (!testing::file_exists(path)) {
    testing::RandomSpec spec;
    spec.arch = arch;
    spec.type = type;
    spec.n_vocab = 96;
    EXPECT_TRUE(testing::write_random_model(spec, path).ok());
  }
  return path;
}

std::shared_ptr<const Adapter> adapter_for(const Model& m, const std::string& base, uint32_t seed,
                                           const std::string& name) {
  const std::string path = testing::temp_path(name + ".lora.gguf");
  LoraSpecForTest s;
  s.seed = seed;
  s.arch = m.config().arch_name;
  EXPECT_TRUE(write_lora(base, s, path).ok());
  auto a = load_adapter(path, m.config(), 1.0f, name);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  return a.ok() ? *a : nullptr;
}

// Prefill of `tokens` (all logits) through a private KV cache, with an adapter or none.
std::vector<float> run(Model& m, const std::vector<int32_t>& tokens, const Adapter* adapter) {
  KvPool kv(m.config(), 4, 16, DType::kF32);
  std::vector<int32_t> blocks = {0, 1, 2, 3};
  SeqInput in;
  in.tokens = tokens.data();
  in.n_tokens = static_cast<int>(tokens.size());
  in.blocks = blocks.data();
  in.n_blocks = 4;
  in.all_logits = true;
  in.adapter = adapter;
  std::vector<float> out;
  Status s = m.forward({in}, &kv, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Mean over rows of KL(softmax(p) || softmax(q)), rows of n.
double mean_kl(const std::vector<float>& p, const std::vector<float>& q, int n) {
  double total = 0;
  const size_t rows = p.size() / n;
  for (size_t r = 0; r < rows; ++r) {
    const float* a = p.data() + r * n;
    const float* b = q.data() + r * n;
    double ma = a[0], mb = b[0];
    for (int i = 1; i < n; ++i) ma = std::max<double>(ma, a[i]), mb = std::max<double>(mb, b[i]);
    double za = 0, zb = 0;
    for (int i = 0; i < n; ++i) za += std::exp(a[i] - ma), zb += std::exp(b[i] - mb);
    double kl = 0;
    for (int i = 0; i < n; ++i) {
      const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
      kl += std::exp(la) * (la - lb);
    }
    total += kl;
  }
  return total / rows;
}

const std::vector<int32_t> kTokens = {5, 17, 2, 90, 33, 41, 8, 60, 11};

TEST(LoraSpec, ParsesPathAndScale) {
  auto a = parse_lora_spec("a.gguf");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->path, "a.gguf");
  EXPECT_EQ(a->scale, 1.0f);
  auto b = parse_lora_spec("dir/a.gguf:0.5");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->path, "dir/a.gguf");
  EXPECT_EQ(b->scale, 0.5f);
  auto c = parse_lora_spec("x:y/a.gguf");  // a colon that is not a scale stays in the path
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->path, "x:y/a.gguf");
  EXPECT_FALSE(parse_lora_spec("a.gguf:inf").ok());
  EXPECT_FALSE(parse_lora_spec(":2").ok());
}

// The side path over a subset of rows against the float64 scalar reference; other rows untouched.
TEST(LoraApply, RowsMatchScalarReference) {
  LoraPair p;
  p.rank = 5;
  p.n_in = 37;
  p.n_out = 53;
  p.scale = 0.7f;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.a.resize(p.rank * p.n_in);
  p.b.resize(p.n_out * p.rank);
  for (float& v : p.a) v = normal(rng);
  for (float& v : p.b) v = normal(rng);
  const int n = 7, xs = 40, ys = 60;  // strides wider than the rows
  std::vector<float> x(n * xs), y(n * ys);
  for (float& v : x) v = normal(rng);
  for (float& v : y) v = normal(rng);
  const std::vector<int> rows = {0, 2, 3, 6};
  std::vector<float> got = y, scratch;
  kernels::ThreadPool pool(2);
  lora_apply_rows(p, x.data(), xs, got.data(), ys, rows, &scratch, &pool);
  for (int r = 0; r < n; ++r) {
    std::vector<float> want(y.begin() + r * ys, y.begin() + r * ys + p.n_out);
    if (std::find(rows.begin(), rows.end(), r) != rows.end()) {
      lora_apply_ref(p, x.data() + r * xs, want.data(), 1);
    }
    for (int c = 0; c < p.n_out; ++c) {
      EXPECT_NEAR(got[r * ys + c], want[c], 1e-4f * (1 + std::fabs(want[c]))) << r << "," << c;
    }
    for (int c = p.n_out; c < ys; ++c) EXPECT_EQ(got[r * ys + c], y[r * ys + c]);
  }
}

// Per request (the side path) and merged at load (W + scale B A) are two computations of the
// same model: on F32 weights they agree to rounding; the adapter changes the logits.
void per_request_equals_merged(const std::string& arch) {
  const std::string base = base_model("lora_base_" + arch, DType::kF32, arch);
  auto m = testing::load(base, 2);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto adapter = adapter_for(**m, base, 11, "merge_" + arch);
  ASSERT_NE(adapter, nullptr);
  const std::vector<float> bare = run(**m, kTokens, nullptr);
  const std::vector<float> side = run(**m, kTokens, adapter.get());
  EXPECT_GT(max_diff(bare, side), 0.05f) << "the adapter should change the logits";

  auto f = gguf::File::open(base);
  ASSERT_TRUE(f.ok());
  LoadOptions o;
  o.n_threads = 2;
  o.device = "cpu";
  o.lora.push_back({testing::temp_path("merge_" + arch + ".lora.gguf"), 1.0f});
  auto merged = load_model(std::shared_ptr<const gguf::File>(std::move(*f)), o);
  ASSERT_TRUE(merged.ok()) << merged.status().to_string();
  const std::vector<float> fused = run(**merged, kTokens, nullptr);
  std::printf("%s: per request vs merged max |diff| %.3g (adapter moves logits by %.3g)\n",
              arch.c_str(), max_diff(side, fused), max_diff(bare, side));
  EXPECT_LT(max_diff(side, fused), 1e-4f);
}

TEST(Lora, PerRequestEqualsMergedChatglm) { per_request_equals_merged("chatglm"); }
TEST(Lora, PerRequestEqualsMergedLlama) { per_request_equals_merged("llama"); }

// The user's scale multiplies alpha / rank: scale 0 is the bare model, and the side path's
// change is linear in the scale at its first order (checked on the merged weights' difference).
TEST(Lora, ScaleZeroIsTheBaseModel) {
  const std::string base = base_model("lora_base_chatglm");
  auto m = testing::load(base, 2);
  ASSERT_TRUE(m.ok());
  LoraSpecForTest s;
  const std::string path = testing::temp_path("scale0.lora.gguf");
  ASSERT_TRUE(write_lora(base, s, path).ok());
  auto a = load_adapter(path, (*m)->config(), 0.0f, "zero");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->lora[0].qkv.scale, 0.0f);
  auto b = load_adapter(path, (*m)->config(), 0.5f, "half");
  ASSERT_TRUE(b.ok());
  EXPECT_FLOAT_EQ((*b)->lora[1].ffn_down.scale, 0.5f * s.alpha / s.rank);
  EXPECT_EQ(max_diff(run(**m, kTokens, nullptr), run(**m, kTokens, a->get())), 0.0f);
}

// One batch holds sequences of three adapters and the bare base, at different positions, with
// cached prefixes: each sequence's logits equal the same sequence run alone.
TEST(Lora, BatchOfThreeAdaptersAndBaseEqualsEachAlone) {
  const std::string base = base_model("lora_base_chatglm");
  auto mm = testing::load(base, 2);
  ASSERT_TRUE(mm.ok());
  Model& m = **mm;
  std::vector<std::shared_ptr<const Adapter>> adapters = {adapter_for(m, base, 21, "a1"),
                                                          adapter_for(m, base, 22, "a2"),
                                                          adapter_for(m, base, 23, "a3")};
  struct Seq {
    std::vector<int32_t> cached, fresh;
    const Adapter* adapter;
    std::vector<int32_t> blocks;
  };
  std::vector<Seq> seqs = {
      {{}, {5, 9, 2, 33, 17}, adapters[0].get(), {0, 4}},
      {{1, 2, 3, 4, 5, 6, 7}, {8}, adapters[1].get(), {1, 5}},
      {{40, 41, 42}, {43, 44, 45}, nullptr, {2, 6}},
      {{70, 71}, {72, 73}, adapters[2].get(), {3, 7}},
  };
  const int bt = 4;
  KvPool kv(m.config(), 8, bt, DType::kF32);
  for (Seq& s : seqs) {
    if (s.cached.empty()) continue;
    std::vector<float> ignore;
    SeqInput in{s.cached.data(), static_cast<int>(s.cached.size()), 0, s.blocks.data(), 2};
    in.adapter = s.adapter;
    ASSERT_TRUE(m.forward({in}, &kv, &ignore).ok());
  }
  std::vector<SeqInput> batch;
  for (Seq& s : seqs) {
    SeqInput in{s.fresh.data(),
                static_cast<int>(s.fresh.size()),
                static_cast<int>(s.cached.size()),
                s.blocks.data(),
                2,
                true};
    in.adapter = s.adapter;
    batch.push_back(in);
  }
  std::vector<float> batched;
  ASSERT_TRUE(m.forward(batch, &kv, &batched).ok());
  std::vector<float> alone;
  for (Seq& s : seqs) {
    KvPool own(m.config(), 2, bt, DType::kF32);
    std::vector<int32_t> blocks = {0, 1};
    std::vector<float> ignore;
    if (!s.cached.empty()) {
      SeqInput in{s.cached.data(), static_cast<int>(s.cached.size()), 0, blocks.data(), 2};
      in.adapter = s.adapter;
      ASSERT_TRUE(m.forward({in}, &own, &ignore).ok());
    }
    SeqInput in{s.fresh.data(),
                static_cast<int>(s.fresh.size()),
                static_cast<int>(s.cached.size()),
                blocks.data(),
                2,
                true};
    in.adapter = s.adapter;
    ASSERT_TRUE(m.forward({in}, &own, &alone).ok());
  }
  EXPECT_LT(max_diff(batched, alone), 1e-5f);
  // The adapters differ: sequence 0 under another adapter gives other logits.
  std::vector<float> other = run(m, seqs[0].fresh, adapters[1].get());
  std::vector<float> mine = run(m, seqs[0].fresh, adapters[0].get());
  EXPECT_GT(max_diff(other, mine), 0.05f);
}

// Merged into quantized weights (dequantize, add, re-quantize) against the unmerged F32 path
// (F32 base weights + the side path): KL divergence of the next-token distributions, beside
// what the base's quantization alone costs (Q8_0 weights + the side path).
TEST(Lora, MergedIntoQuantizedWeightsStaysCloseToF32) {
  const std::string f32 = base_model("lora_base_chatglm");
  auto ref_model = testing::load(f32, 2);
  ASSERT_TRUE(ref_model.ok());
  auto adapter = adapter_for(**ref_model, f32, 31, "quality");
  ASSERT_NE(adapter, nullptr);
  const std::vector<float> ref = run(**ref_model, kTokens, adapter.get());
  const int nv = (*ref_model)->config().n_vocab;
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    const std::string q =
        testing::temp_path(std::string("lora_base_") + dtype_name(type) + ".gguf");
    ASSERT_TRUE(testing::requantize(f32, q, type).ok());
    auto side_model = testing::load(q, 2);
    ASSERT_TRUE(side_model.ok());
    const std::vector<float> side = run(**side_model, kTokens, adapter.get());
    auto f = gguf::File::open(q);
    ASSERT_TRUE(f.ok());
    LoadOptions o;
    o.n_threads = 2;
    o.device = "cpu";
    o.lora.push_back({testing::temp_path("quality.lora.gguf"), 1.0f});
    auto merged = load_model(std::shared_ptr<const gguf::File>(std::move(*f)), o);
    ASSERT_TRUE(merged.ok()) << merged.status().to_string();
    const std::vector<float> fused = run(**merged, kTokens, nullptr);
    const double kl_merged = mean_kl(ref, fused, nv), kl_side = mean_kl(ref, side, nv);
    const double kl_bare = mean_kl(ref, run(**side_model, kTokens, nullptr), nv);
    std::printf(
        "%s: KL vs F32 per request: merged %.3g, %s + per request %.3g, "
        "no adapter %.3g\n",
        dtype_name(type), kl_merged, dtype_name(type), kl_side, kl_bare);
    // Re-quantizing the merged weights costs about what quantizing the base did (within 3x),
    // and under a quarter of what dropping the adapter costs.
    EXPECT_LT(kl_merged, 3 * kl_side + 1e-6);
    EXPECT_LT(kl_merged, 0.25 * kl_bare);
  }
}

// Files that do not fit their base: each error names the part, and nothing is loaded.
TEST(Lora, MisfitsAreNamed) {
  const std::string base = base_model("lora_base_chatglm");
  auto m = testing::load(base, 2);
  ASSERT_TRUE(m.ok());
  const Config& c = (*m)->config();
  auto expect_error = [&](const LoraSpecForTest& s, const std::string& needle) {
    const std::string path = testing::temp_path("bad.lora.gguf");
    ASSERT_TRUE(write_lora(base, s, path).ok());
    auto a = load_adapter(path, c, 1.0f, "bad");
    ASSERT_FALSE(a.ok()) << needle;
    EXPECT_NE(a.status().message().find(needle), std::string::npos) << a.status().message();
  };
  LoraSpecForTest wrong_arch;
  wrong_arch.arch = "llama";
  expect_error(wrong_arch, "architecture 'llama'");
  LoraSpecForTest wrong_shape;
  wrong_shape.reshape = [](const std::string& n, std::vector<int64_t>* shape) {
    if (n == "blk.1.ffn_down.weight.lora_a") (*shape)[0] += 1;
  };
  expect_error(wrong_shape, "blk.1.ffn_down.weight.lora_a");
  LoraSpecForTest rank_mismatch;
  rank_mismatch.reshape = [](const std::string& n, std::vector<int64_t>* shape) {
    if (n == "blk.0.attn_output.weight.lora_b") (*shape)[0] = 3;
  };
  expect_error(rank_mismatch, "blk.0.attn_output.weight.lora_a");
  LoraSpecForTest lone;
  lone.drop = "blk.0.ffn_up.weight.lora_b";
  expect_error(lone, "blk.0.ffn_up.weight has no lora_b");
  LoraSpecForTest extra_layer;
  extra_layer.extra = "blk.7.attn_qkv.weight.lora_a";
  expect_error(extra_layer, "blk.7.attn_qkv.weight");
  LoraSpecForTest other_type;
  other_type.adapter_type = "ia3";
  expect_error(other_type, "'ia3'");
  // A model file is not an adapter.
  auto not_adapter = load_adapter(base, c, 1.0f, "model");
  ASSERT_FALSE(not_adapter.ok());
  EXPECT_NE(not_adapter.status().message().find("not an adapter"), std::string::npos);
}

// An adapter made for another model (a different layer count) is refused by forward, and a
// --lora that does not fit is refused by load_model, naming the tensor.
TEST(Lora, WrongBaseIsRefusedAtLoadAndForward) {
  const std::string base = base_model("lora_base_chatglm");
  auto m = testing::load(base, 2);
  ASSERT_TRUE(m.ok());
  Adapter wrong;
  wrong.name = "short";
  wrong.lora.resize(1);
  KvPool kv((*m)->config(), 1, 16, DType::kF32);
  int32_t block = 0, token = 3;
  SeqInput in{&token, 1, 0, &block, 1};
  in.adapter = &wrong;
  std::vector<float> out;
  Status s = (*m)->forward({in}, &kv, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("adapter 'short'"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());

  LoraSpecForTest bad;
  bad.reshape = [](const std::string& n, std::vector<int64_t>* shape) {
    if (n == "blk.0.attn_qkv.weight.lora_b") (*shape)[1] += 8;
  };
  const std::string path = testing::temp_path("bad_merge.lora.gguf");
  ASSERT_TRUE(write_lora(base, bad, path).ok());
  auto f = gguf::File::open(base);
  ASSERT_TRUE(f.ok());
  LoadOptions o;
  o.device = "cpu";
  o.lora.push_back({path, 1.0f});
  auto merged = load_model(std::shared_ptr<const gguf::File>(std::move(*f)), o);
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.status().message().find("blk.0.attn_qkv.weight.lora_b"), std::string::npos)
      << merged.status().message();
}

// LoRA per request on the GPU (transformer_gpu.h: each sequence's pairs on its own rows after
// each product, uploaded once per adapter): the logits of a batch that mixes adapters and the
// base equal the CPU's, alone and batched, whole and split with the CPU (--gpu-layers: each
// side applies its own layers' pairs); more adapters than the GPU keeps (8) cycle through it.
struct LoraRun {
  std::vector<int32_t> tokens;
  const Adapter* adapter;
};

// Each run's prefill logits (all rows) through one step of a batch of all of them.
std::vector<float> run_batch(Model& m, const std::vector<LoraRun>& runs) {
  KvPool kv(m.config(), 2 * static_cast<int>(runs.size()), 16, DType::kF32);
  std::vector<std::vector<int32_t>> blocks;
  std::vector<SeqInput> batch;
  for (size_t i = 0; i < runs.size(); ++i) {
    blocks.push_back({2 * static_cast<int>(i), 2 * static_cast<int>(i) + 1});
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    SeqInput in;
    in.tokens = runs[i].tokens.data();
    in.n_tokens = static_cast<int>(runs[i].tokens.size());
    in.blocks = blocks[i].data();
    in.n_blocks = 2;
    in.all_logits = true;
    in.adapter = runs[i].adapter;
    batch.push_back(in);
  }
  std::vector<float> out;
  const Status s = m.forward(batch, &kv, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

void expect_gpu_lora_equals_cpu(const std::string& arch) {
  const std::string base = base_model("lora_gpu_base_" + arch, DType::kF32, arch);
  auto cpu = testing::load(base, 2);
  ASSERT_TRUE(cpu.ok());
  const std::vector<std::shared_ptr<const Adapter>> adapters = {
      adapter_for(**cpu, base, 31, arch + "g1"), adapter_for(**cpu, base, 32, arch + "g2")};
  // 17 tokens: the tiled matmuls of the prefill; 1 and 3: the decode shaders.
  const std::vector<int32_t> long_prompt = {5, 17, 2,  90, 33, 41, 8,  60, 11,
                                            3, 7,  70, 12, 13, 44, 45, 46};
  const std::vector<LoraRun> runs = {{long_prompt, adapters[0].get()},
                                     {{5, 9, 2}, nullptr},
                                     {{1}, adapters[1].get()},
                                     {{40, 41, 42}, adapters[0].get()}};
  const std::vector<float> want = run_batch(**cpu, runs);
  for (int split : {-1, 1}) {  // whole; layer 0 on the CPU, layer 1 on the GPU
    SCOPED_TRACE(arch + (split < 0 ? " whole" : " split"));
    auto gpu = testing::load_on_gpu(base, split);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    if (split > 0) {
      ASSERT_EQ(testing::gpu_layers_of(**gpu), split);
    }
    const std::vector<float> got = run_batch(**gpu, runs);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]) / (1 + std::fabs(want[i])));
    }
    EXPECT_LT(worst, 1e-4f);
    // Alone, each run gives its rows of the batch.
    std::vector<float> alone;
    for (const LoraRun& r : runs) {
      const std::vector<float> one = run_batch(**gpu, {r});
      alone.insert(alone.end(), one.begin(), one.end());
    }
    EXPECT_LT(max_diff(alone, got), 1e-4f);
  }
  // The adapters matter: without them the logits move.
  EXPECT_GT(max_diff(run_batch(**cpu, {{long_prompt, nullptr}}),
                     run_batch(**cpu, {{long_prompt, adapters[0].get()}})),
            0.05f);
}

TEST(LoraGpu, PerRequestEqualsTheCpuChatglm) { expect_gpu_lora_equals_cpu("chatglm"); }
TEST(LoraGpu, PerRequestEqualsTheCpuLlama) { expect_gpu_lora_equals_cpu("llama"); }

// Ten adapters through a GPU that keeps eight: each step's logits equal the CPU's, also for an
// adapter dropped and uploaded again.
TEST(LoraGpu, MoreAdaptersThanTheGpuKeepsCycleThroughIt) {
  const std::string base = base_model("lora_gpu_cycle_base");
  auto cpu = testing::load(base, 2);
  auto gpu = testing::load_on_gpu(base);
  ASSERT_TRUE(cpu.ok());
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  std::vector<std::shared_ptr<const Adapter>> adapters;
  for (int i = 0; i < 10; ++i) {
    adapters.push_back(adapter_for(**cpu, base, 40 + i, "cyc" + std::to_string(i)));
  }
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 9, 1}) {
    SCOPED_TRACE("adapter " + std::to_string(i));
    const std::vector<LoraRun> runs = {{kTokens, adapters[i].get()}};
    EXPECT_LT(max_diff(run_batch(**gpu, runs), run_batch(**cpu, runs)), 1e-4f);
  }
}

}  // namespace
}  // namespace glm::model
