#include "convert/gen_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "convert/synthetic_vocab.h"
#include "convert/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab_convert.h"

namespace glm::convert {
namespace {

using testing::open_or_die;
using testing::read_bytes;
using testing::TempDir;

Status gen(Family arch, const std::string& p, DType type, uint64_t seed, const std::string& path,
           const std::string& vocab = "") {
  GenOptions o;
  o.family = arch;
  o.preset = p;
  o.type = type;
  o.seed = seed;
  o.vocab_path = vocab;
  return generate_model(o, path, nullptr);
}

int64_t get_int(const gguf::File& f, const std::string& key) {
  StatusOr<int64_t> v = f.get_int(key);
  EXPECT_TRUE(v.ok()) << key;
  return v.ok() ? *v : -1;
}

// The file's metadata and tensors against the GGUF layout (docs/models.md) for the preset's
// hyperparameters.
void check_layout(const gguf::File& f, Family arch, const Hparams& hp, DType type) {
  const std::string a = gguf_arch(arch);
  EXPECT_EQ(*f.get_string("general.architecture"), a);
  EXPECT_NE(f.get_string("general.name")->find("random weights"), std::string::npos);
  EXPECT_EQ(get_int(f, a + ".context_length"), hp.n_ctx);
  EXPECT_EQ(get_int(f, a + ".embedding_length"), hp.n_embd);
  EXPECT_EQ(get_int(f, a + ".feed_forward_length"), hp.n_ff);
  EXPECT_EQ(get_int(f, a + ".block_count"), hp.n_layer);
  EXPECT_EQ(get_int(f, a + ".attention.head_count"), hp.n_head);
  EXPECT_EQ(get_int(f, a + ".attention.head_count_kv"), hp.n_head_kv);
  EXPECT_EQ(get_int(f, a + ".rope.dimension_count"),
            arch == Family::kLlama ? hp.head_dim() : hp.head_dim() / 2);
  EXPECT_FLOAT_EQ(
      *f.get_float(a + (arch == Family::kChatGLM1 ? ".attention.layer_norm_epsilon"
                                                  : ".attention.layer_norm_rms_epsilon")),
      hp.norm_eps);
  EXPECT_FLOAT_EQ(*f.get_float(a + ".rope.freq_base"), hp.rope_base);
  EXPECT_EQ(get_int(f, "general.file_type"), file_type_of(type));
  const std::vector<TensorPlan> plan = tensor_plan(hp, type);
  ASSERT_EQ(f.tensors().size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(f.tensors()[i].name, plan[i].name);
    EXPECT_EQ(f.tensors()[i].shape, plan[i].shape) << plan[i].name;
    EXPECT_EQ(f.tensors()[i].type, plan[i].type) << plan[i].name;
  }
  // Vocabulary: one token per embedding row.
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(static_cast<int64_t>(tokens->array_size()), hp.n_vocab);
}

TEST(GenModel, TinyFilesFollowTheirLayouts) {
  TempDir dir;
  for (Family arch : {Family::kChatGLM1, Family::kChatGLM2, Family::kChatGLM3, Family::kGLM4,
                      Family::kLlama, Family::kGLM4_0414}) {
    SCOPED_TRACE(family_name(arch));
    const std::string path = dir.file(std::string(family_name(arch)) + ".gguf");
    ASSERT_TRUE(gen(arch, "tiny", DType::kF16, 1, path).ok());
    auto f = open_or_die(path);
    ASSERT_NE(f, nullptr);
    check_layout(*f, arch, *preset(arch, "tiny"), DType::kF16);
    const bool glm4_0414 = arch == Family::kGLM4_0414;
    EXPECT_EQ(f->tensor("blk.0.attn_qkv.bias") != nullptr, arch != Family::kLlama && !glm4_0414);
    EXPECT_EQ(f->tensor("blk.0.attn_q.bias") != nullptr, glm4_0414);
    EXPECT_EQ(f->tensor("blk.1.post_ffw_norm.weight") != nullptr, glm4_0414);
    EXPECT_EQ(f->tensor("blk.1.ffn_down.bias") != nullptr, arch == Family::kChatGLM1);
    if (glm4_0414) {
      EXPECT_EQ(get_int(*f, "glm4.attention.key_length"), 128);
      EXPECT_EQ(get_int(*f, "glm4.rope.dimension_count"), 64);
      EXPECT_EQ(get_int(*f, "tokenizer.ggml.eot_token_id"), 512 - 14 + 7);  // <|user|>
    }
  }
}

// ChatGLM-6B: its own layout and a unigram vocabulary with the v1 specials at their real ids.
TEST(GenModel, ChatGlm1SixBHasTheRealShapeAndVocabularyLayout) {
  StatusOr<Hparams> hp = preset(Family::kChatGLM1, "6b");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->n_vocab, 130528);
  EXPECT_EQ(hp->n_ff, 16384);
  EXPECT_EQ(hp->n_head_kv, 32);
  // THUDM/chatglm-6b: 6,173,286,400 parameters (LM head tied to the embeddings).
  EXPECT_TRUE(hp->tied_output);
  EXPECT_EQ(plan_parameters(tensor_plan(*hp, DType::kF16)), 6173286400u);
  auto v = synthetic_vocab(Family::kChatGLM1, 130528);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->model, "t5");
  EXPECT_EQ(v->pre, "chatglm1");
  EXPECT_EQ(v->tokens[130001], "[gMASK]");
  EXPECT_EQ(v->tokens[130004], "<sop>");
  EXPECT_EQ(v->eos, 130005);
  EXPECT_EQ(v->tokens[130008], "<|tab|>");
  EXPECT_EQ(v->tokens[130088], "<0x00>");
  EXPECT_EQ(v->tokens[4], "<n>");
  EXPECT_EQ(v->tokens[5], "\xe2\x96\x81");
}

TEST(GenModel, ChatTemplateTokensExistInTheSyntheticVocabulary) {
  TempDir dir;
  struct Case {
    Family arch;
    std::vector<std::string> tokens;
  };
  const Case cases[] = {
      {Family::kChatGLM3,
       {"[gMASK]", "sop", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}},
      {Family::kChatGLM2, {"[gMASK]", "sop"}},
      {Family::kGLM4, {"[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|endoftext|>"}},
      {Family::kGLM4_0414,
       {"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file("v.gguf");
    ASSERT_TRUE(gen(c.arch, "tiny", DType::kF32, 0, path).ok());
    auto f = open_or_die(path);
    StatusOr<tok::VocabSpec> v = tok::read_vocab(*f);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    for (const std::string& t : c.tokens) {
      auto it = std::find(v->tokens.begin(), v->tokens.end(), t);
      ASSERT_NE(it, v->tokens.end()) << t;
      EXPECT_EQ(v->types[it - v->tokens.begin()], tok::kTokenControl) << t;
    }
    EXPECT_NE(v->chat_template.find("[gMASK]"), std::string::npos);
    ASSERT_GE(v->eos, 0);
    EXPECT_EQ(v->types[v->eos], tok::kTokenControl);
    // Byte fallback: the 256 byte tokens follow <unk> <bos> <eos>.
    EXPECT_EQ(v->tokens[3], "<0x00>");
    EXPECT_EQ(v->tokens[258], "<0xFF>");
  }
}

TEST(GenModel, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir dir;
  for (DType t : {DType::kF16, DType::kQ4_0}) {
    ASSERT_TRUE(gen(Family::kChatGLM3, "tiny", t, 5, dir.file("a.gguf")).ok());
    ASSERT_TRUE(gen(Family::kChatGLM3, "tiny", t, 5, dir.file("b.gguf")).ok());
    ASSERT_TRUE(gen(Family::kChatGLM3, "tiny", t, 6, dir.file("c.gguf")).ok());
    const std::string a = read_bytes(dir.file("a.gguf"));
    EXPECT_GT(a.size(), 30000u);
    EXPECT_EQ(testing::first_difference(a, read_bytes(dir.file("b.gguf"))), -1);
    const std::string c = read_bytes(dir.file("c.gguf"));
    EXPECT_EQ(a.size(), c.size());
    EXPECT_NE(testing::first_difference(a, c), -1);
  }
}

// Chunks made on several threads at once give the same file as one thread: a tiny model whose
// feed-forward tensors (n_ff 20000: 40000 x 64 ffn_up) span several chunks of rows.
TEST(GenModel, ThreadsWriteTheSameBytes) {
  TempDir dir;
  GenOptions o;
  o.family = Family::kChatGLM3;
  o.type = DType::kQ4_0;
  tok::VocabSpec vocab;
  StatusOr<Hparams> hp = gen_hparams(o, &vocab);
  ASSERT_TRUE(hp.ok()) << hp.status().message();
  hp->n_ff = 20000;
  ASSERT_GT(hp->n_ff * 2 * hp->n_embd, 2 * (int64_t{1} << 20));  // over two chunks of rows
  for (int threads : {1, 3}) {
    ASSERT_TRUE(write_model_file(dir.file("t" + std::to_string(threads) + ".gguf"), *hp, vocab,
                                 o.type, random_rows(7), nullptr, nullptr, threads)
                    .ok());
  }
  const std::string one = read_bytes(dir.file("t1.gguf"));
  EXPECT_GT(one.size(), 2u << 20);
  EXPECT_EQ(testing::first_difference(one, read_bytes(dir.file("t3.gguf"))), -1);
}

TEST(GenModel, ProgressRisesToTheWeightBytesWritten) {
  TempDir dir;
  GenOptions o;
  o.family = Family::kChatGLM3;
  o.type = DType::kQ8_0;
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  o.progress = [&calls](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  WriteReport rep;
  ASSERT_TRUE(generate_model(o, dir.file("m.gguf"), &rep).ok());
  ASSERT_GE(calls.size(), rep.n_tensors);  // at least once a tensor
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, rep.n_bytes);
    if (i > 0) {
      EXPECT_GT(calls[i].first, calls[i - 1].first);
    }
  }
  EXPECT_EQ(calls.back().first, rep.n_bytes);
}

TEST(GenModel, WeightsHaveTrainedModelScale) {
  TempDir dir;
  const std::string path = dir.file("w.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM3, "tiny", DType::kF32, 3, path).ok());
  auto f = open_or_die(path);
  for (const gguf::TensorInfo& t : f->tensors()) {
    const float* x = reinterpret_cast<const float*>(t.data);
    const int64_t n = t.n_elements();
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(x[i]));
      sum += x[i];
    }
    const double mean = sum / n;
    for (int64_t i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const double sd = std::sqrt(sq / n);
    // Bounds: 6 standard errors of the sample mean / sd for n values.
    const double se = 0.02 / std::sqrt(static_cast<double>(n));
    if (t.name.find("norm") != std::string::npos) {
      EXPECT_NEAR(mean, 1.0, 6 * se) << t.name;
    } else {
      EXPECT_NEAR(mean, 0.0, 6 * se) << t.name;
    }
    EXPECT_NEAR(sd, 0.02, 6 * 0.02 / std::sqrt(2.0 * n)) << t.name;
  }
}

TEST(GenModel, QuantizedTypesFollowTheTypePolicy) {
  TempDir dir;
  for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kBF16, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(dtype_name(type));
    const std::string path = dir.file("q.gguf");
    ASSERT_TRUE(gen(Family::kGLM4, "tiny", type, 2, path).ok());
    auto f = open_or_die(path);
    ASSERT_NE(f, nullptr);
    check_layout(*f, Family::kGLM4, *preset(Family::kGLM4, "tiny"), type);
    EXPECT_EQ(f->tensor("blk.1.attn_norm.weight")->type, DType::kF32);
    if (type == DType::kBF16) {
      EXPECT_EQ(f->find("general.quantization_version"), nullptr);
    } else {
      EXPECT_EQ(get_int(*f, "general.quantization_version"), 2);
    }
  }
}

// glm4moe: llama.cpp's expert keys, the 3-D expert tensors quantized row by row, the router
// kept F32 (llama.cpp's quantizer never quantizes ffn_gate_inp), the dense leading layer.
TEST(GenModel, Glm4MoeWritesExpertKeysAndTensors) {
  TempDir dir;
  const std::string path = dir.file("moe.gguf");
  ASSERT_TRUE(gen(Family::kGLM4MoE, "tiny", DType::kQ8_0, 7, path).ok());
  auto f = open_or_die(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->get_string("general.architecture"), "glm4moe");
  EXPECT_EQ(get_int(*f, "glm4moe.expert_count"), 8);
  EXPECT_EQ(get_int(*f, "glm4moe.expert_used_count"), 2);
  EXPECT_EQ(get_int(*f, "glm4moe.expert_shared_count"), 1);
  EXPECT_EQ(get_int(*f, "glm4moe.leading_dense_block_count"), 1);
  EXPECT_EQ(get_int(*f, "glm4moe.expert_feed_forward_length"), 128);
  EXPECT_EQ(get_int(*f, "glm4moe.expert_gating_func"), 2);
  EXPECT_EQ(get_int(*f, "glm4moe.rope.dimension_count"), 64);
  EXPECT_TRUE(*f->get_bool("glm4moe.expert_weights_norm"));
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("glm4moe.expert_weights_scale")), 2.5f);
  const gguf::TensorInfo* gate = f->tensor("blk.1.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{256, 128, 8}));
  EXPECT_EQ(gate->type, DType::kQ8_0);
  EXPECT_EQ(f->tensor("blk.2.ffn_down_exps.weight")->shape, (std::vector<int64_t>{128, 256, 8}));
  EXPECT_EQ(f->tensor("blk.1.ffn_gate_inp.weight")->type, DType::kF32);
  EXPECT_EQ(f->tensor("blk.1.exp_probs_b.bias")->type, DType::kF32);
  EXPECT_EQ(f->tensor("blk.1.ffn_up_shexp.weight")->type, DType::kQ8_0);
  EXPECT_NE(f->tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.0.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.1.ffn_gate.weight"), nullptr);
  EXPECT_EQ(role_from_name("blk.1.ffn_gate_inp.weight", 2), Role::kRouter);
  EXPECT_EQ(role_from_name("blk.1.ffn_down_exps.weight", 3), Role::kFfnDown);
  EXPECT_FALSE(gen(Family::kGLM4MoE, "6b", DType::kF32, 7, dir.file("x.gguf")).ok());
  // "air": GLM-4.5-Air (its heads, 128 experts of 1408, top-8, 1 shared) at its widths, 3 layers
  // with the first dense (the file is 3.5 GB at q4_0: only its shape is checked here).
  auto air = preset(Family::kGLM4MoE, "air");
  ASSERT_TRUE(air.ok()) << air.status().to_string();
  EXPECT_TRUE(air->validate().ok());
  EXPECT_EQ(air->n_expert, 128);
  EXPECT_EQ(air->n_expert_used, 8);
  EXPECT_EQ(air->n_expert_shared, 1);
  EXPECT_EQ(air->n_ff_exp, 1408);
  EXPECT_EQ(air->n_embd, 4096);
  EXPECT_EQ(air->n_head, 96);  // heads of 128 over 4096: wider than n_embd / n_head
  EXPECT_EQ(air->n_head_kv, 8);
  EXPECT_EQ(air->head_dim(), 128);
  EXPECT_EQ(air->dims().q_dim(), 96 * 128);
  EXPECT_EQ(air->n_layer, 3);
  EXPECT_EQ(air->n_dense_lead, 1);
  EXPECT_EQ(air->n_ff_exp % 16, 0);  // each expert whole groups of the repacked copy
}

// glm47-flash: GLM-4.7-Flash's tensors in llama.cpp's deepseek2 names and shapes (the tiny
// preset written; "flash", its real widths in 3 layers, 1.2 GB at q4_0, planned only).
TEST(GenModel, Glm47FlashHasTheLatentAttentionsTensors) {
  TempDir dir;
  ASSERT_TRUE(gen(Family::kGLM47Flash, "tiny", DType::kF32, 7, dir.file("f.gguf")).ok());
  auto f = gguf::File::open(dir.file("f.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*(*f)->get_string("general.architecture"), "deepseek2");
  EXPECT_EQ(*(*f)->get_int("deepseek2.attention.key_length"), 160);  // kv_lora + rope
  EXPECT_EQ(*(*f)->get_int("deepseek2.attention.value_length"), 128);
  EXPECT_EQ(*(*f)->get_int("deepseek2.attention.key_length_mla"), 96);
  EXPECT_EQ(*(*f)->get_int("deepseek2.attention.head_count_kv"), 1);
  EXPECT_EQ((*f)->tensor("blk.1.attn_k_b.weight")->shape, (std::vector<int64_t>{64, 128, 4}));
  EXPECT_EQ((*f)->tensor("blk.1.attn_v_b.weight")->shape, (std::vector<int64_t>{128, 64, 4}));
  EXPECT_EQ((*f)->tensor("blk.1.attn_q.weight"), nullptr);
  auto flash = preset(Family::kGLM47Flash, "flash");
  ASSERT_TRUE(flash.ok()) << flash.status().to_string();
  ASSERT_TRUE(flash->validate().ok());
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorPlan& t : tensor_plan(*flash, DType::kQ4_0)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes["blk.1.attn_q_a.weight"], (std::vector<int64_t>{2048, 768}));
  EXPECT_EQ(shapes["blk.1.attn_q_b.weight"], (std::vector<int64_t>{768, 20 * 256}));
  EXPECT_EQ(shapes["blk.1.attn_kv_a_mqa.weight"], (std::vector<int64_t>{2048, 576}));
  EXPECT_EQ(shapes["blk.1.attn_k_b.weight"], (std::vector<int64_t>{192, 512, 20}));
  EXPECT_EQ(shapes["blk.1.attn_v_b.weight"], (std::vector<int64_t>{512, 256, 20}));
  EXPECT_EQ(shapes["blk.1.attn_output.weight"], (std::vector<int64_t>{5120, 2048}));
  EXPECT_EQ(shapes["blk.1.ffn_up_exps.weight"], (std::vector<int64_t>{2048, 1536, 64}));
  EXPECT_EQ(shapes["blk.0.ffn_up.weight"], (std::vector<int64_t>{2048, 10240}));
  EXPECT_FALSE(preset(Family::kGLM47Flash, "6b").ok());
}

// glm4moe files carry one MTP block after the trunk, as GLM-4.5's: counted in block_count,
// announced by nextn_predict_layers, its nextn tensors in llama.cpp's names (the head as the
// output is typed, q6_k under q4_0); mtp = false (--no-mtp) writes the trunk alone, the same
// bytes for every trunk tensor.
TEST(GenModel, Glm4MoeWritesTheMtpBlockUnlessAskedNot) {
  TempDir dir;
  GenOptions o;
  o.family = Family::kGLM4MoE;
  o.type = DType::kQ4_0;
  o.seed = 5;
  ASSERT_TRUE(generate_model(o, dir.file("with.gguf"), nullptr).ok());
  o.mtp = false;
  ASSERT_TRUE(generate_model(o, dir.file("without.gguf"), nullptr).ok());
  auto with = open_or_die(dir.file("with.gguf"));
  auto without = open_or_die(dir.file("without.gguf"));
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  EXPECT_EQ(get_int(*with, "glm4moe.block_count"), 4);
  EXPECT_EQ(get_int(*with, "glm4moe.nextn_predict_layers"), 1);
  EXPECT_EQ(get_int(*without, "glm4moe.block_count"), 3);
  EXPECT_EQ(get_int(*without, "glm4moe.nextn_predict_layers"), 0);
  EXPECT_EQ(with->tensor("blk.3.nextn.eh_proj.weight")->shape, (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(with->tensor("blk.3.nextn.shared_head_head.weight")->type, DType::kQ6_K);
  EXPECT_EQ(with->tensor("blk.3.nextn.enorm.weight")->type, DType::kF32);
  EXPECT_NE(with->tensor("blk.3.ffn_gate_exps.weight"), nullptr);
  EXPECT_EQ(without->tensor("blk.3.attn_norm.weight"), nullptr);
  EXPECT_EQ(with->tensors().size(), without->tensors().size() + 17 + 6);
  for (const gguf::TensorInfo& t : without->tensors()) {
    const gguf::TensorInfo* w = with->tensor(t.name);
    ASSERT_NE(w, nullptr) << t.name;
    ASSERT_EQ(w->n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(w->data, t.data, t.n_bytes), 0) << t.name;
  }
}

TEST(GenModel, RealVocabularyReplacesThePresetVocabulary) {
  const std::string model = testing::shared_data("tokenizers/chatglm3.tokenizer.model");
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "absent: " << model;
  TempDir dir;
  const std::string path = dir.file("v.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM3, "tiny", DType::kQ8_0, 0, path, model).ok());
  auto f = open_or_die(path);
  StatusOr<tok::VocabSpec> want = tok::read_tokenizer_model(model);
  ASSERT_TRUE(want.ok());
  StatusOr<tok::VocabSpec> got = tok::read_vocab(*f);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_EQ(got->scores, want->scores);
  EXPECT_EQ(got->types, want->types);
  EXPECT_EQ(f->tensor("token_embd.weight")->shape, (std::vector<int64_t>{64, 65024}));
}

TEST(GenModel, ChatGLM2WithTheChatGLM3TokenizerGetsChatGLM2Specials) {
  // ChatGLM2 and ChatGLM3 ship the same tokenizer.model; ChatGLM2's vocabulary has only the 5
  // specials [MASK] [gMASK] [sMASK] sop eop (no <|user|> roles, no ChatGLM3 template).
  const std::string model = testing::shared_data("tokenizers/chatglm3.tokenizer.model");
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "absent: " << model;
  TempDir dir;
  const std::string path = dir.file("v2.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM2, "tiny", DType::kQ8_0, 0, path, model).ok());
  auto f = open_or_die(path);
  StatusOr<tok::VocabSpec> got = tok::read_vocab(*f);
  ASSERT_TRUE(got.ok());
  for (const char* role : {"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}) {
    EXPECT_EQ(std::find(got->tokens.begin(), got->tokens.end(), role), got->tokens.end()) << role;
  }
  for (const char* special : {"[gMASK]", "sop", "eop"}) {
    auto it = std::find(got->tokens.begin(), got->tokens.end(), special);
    ASSERT_NE(it, got->tokens.end()) << special;
    EXPECT_EQ(got->types[it - got->tokens.begin()], tok::kTokenControl) << special;
  }
  EXPECT_TRUE(got->chat_template.empty());
}

TEST(GenModel, BadOptionsAreErrors) {
  TempDir dir;
  Status s =
      gen(Family::kChatGLM3, "tiny", DType::kF16, 0, dir.file("x.gguf"), dir.file("missing.model"));
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_FALSE(gen(Family::kChatGLM3, "medium", DType::kF16, 0, dir.file("x.gguf")).ok());
  s = gen(Family::kChatGLM3, "tiny", DType::kF16, 0, dir.file("no/such/dir/x.gguf"));
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}

}  // namespace
}  // namespace glm::convert
