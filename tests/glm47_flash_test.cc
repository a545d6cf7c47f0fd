// GLM-4.7-Flash (llama.cpp's `deepseek2` layout: multi-head latent attention, glm4moe's experts)
// against llama.cpp: the logits a libllama program printed for `gen-model --arch glm47-flash
// --preset tiny` files (tests/data/glm47-flash/README.md). The files are regenerated here from
// their seed. The tiny preset keeps the real attention's structure (a query rank, a compressed
// K/V row with a rotary part, per-head key and value expansions) at small widths, so a wrong
// absorption, norm, rotary pairing, scale or value expansion moves these logits.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/test_util.h"
#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "llama_reference.h"
#include "model/batch_test_util.h"
#include "model/eval.h"
#include "model/gpu_test_util.h"
#include "model/test_util.h"
#include "tokenizer/chat_template.h"

namespace glm {
namespace {

std::string flash_data(const std::string& name) {
  return std::string(GLM_SOURCE_DIR) + "/tests/data/glm47-flash/" + name;
}

// The tiny file, with its MTP block (the trunk's bytes are those of the trunk-only file that
// llama.cpp ran: each tensor's values depend on the seed and its name).
std::string tiny_flash(DType type) {
  return glm::testing::tiny_model("glm47-flash-tiny", convert::Family::kGLM47Flash, type);
}

using glm::testing::Compare;
using glm::testing::kPrefill;

// The file of `preset` (tiny, tiny-wide) against llama.cpp's f32 logits of it on `device`, with
// f32 and f16 caches.
void expect_tiny_f32_matches(const std::string& device, const std::string& preset = "tiny") {
  const std::string path = preset == "tiny" ? tiny_flash(DType::kF32)
                                            : glm::testing::tiny_model("glm47-flash-" + preset,
                                                                       convert::Family::kGLM47Flash,
                                                                       DType::kF32, preset);
  const std::string golden = flash_data(preset + "-f32.logits.jsonl");
  Compare c = glm::testing::compare_with_reference(path, golden, kPrefill, DType::kF32, device);
  std::printf("glm47-flash %s f32 (%s): max |diff| %.3g (max |logit| %.3g), argmax mismatches %d\n",
              preset.c_str(), device.c_str(), c.max_diff, c.max_abs, c.argmax_mismatches);
  EXPECT_LT(c.max_diff, 1e-4f);
  EXPECT_GT(c.max_abs, 0.5f);  // logits that mean something
  EXPECT_EQ(c.argmax_mismatches, 0);
  // An F16 cache of the compressed rows, against the F32-KV reference: ../shared/data's 5e-3.
  c = glm::testing::compare_with_reference(path, golden, kPrefill, DType::kF16, device);
  EXPECT_LT(c.max_diff, 5e-3f);
  EXPECT_EQ(c.clear_argmax_mismatches, 0);
}

TEST(Glm47Flash, TinyF32LogitsMatchLlamaCpp) { expect_tiny_f32_matches("cpu"); }
// GLM-4.7-Flash's own attention widths (cache rows of 576: the GPU's wide attention variants).
TEST(Glm47Flash, TinyWideF32LogitsMatchLlamaCpp) { expect_tiny_f32_matches("cpu", "tiny-wide"); }
TEST(Glm47Flash, OnTheGpuTinyWideF32LogitsMatchLlamaCpp) {
  expect_tiny_f32_matches("vulkan", "tiny-wide");
}

// On the GPU (lavapipe in CI): the absorbed queries and K rows by gpu::matmul_experts (a head an
// expert), head_norm and rope at their columns, the K-rows-only cache and its attention
// (transformer_gpu_mla.cc).
TEST(Glm47Flash, OnTheGpuTinyF32LogitsMatchLlamaCpp) { expect_tiny_f32_matches("vulkan"); }

// Q8_0 weights: both sides round the activations to 8 bits their own way (0.05, as glm4moe's
// tiny file). One decode position (18) chooses another expert on that rounding (its router's
// top two are that close): 0.17 there, so it is bounded by 0.25 and every other position by
// the quantized tolerance; no answer token differs clearly.
void expect_tiny_q8_matches(const std::string& device) {
  const std::vector<model::testing::JsonRow> want =
      model::testing::read_jsonl(flash_data("tiny-q8_0.logits.jsonl"));
  ASSERT_EQ(want.size(), 20u);
  std::vector<int32_t> prompt, decode;
  for (size_t i = 0; i < want.size(); ++i) {
    (static_cast<int>(i) < kPrefill ? prompt : decode).push_back(want[i].token);
  }
  auto m = model::testing::load(tiny_flash(DType::kQ8_0), 2, true, device);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ((*m)->device_name().substr(0, 3), device.substr(0, 3));
  model::EvalOptions o;
  o.kv_type = DType::kF32;
  auto rows = model::evaluate(**m, prompt, decode, o);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  ASSERT_EQ(rows->size(), want.size());
  int over = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    float d = 0;
    for (size_t j = 0; j < want[i].values.size(); ++j) {
      d = std::max(d, std::fabs((*rows)[i].values[j] - want[i].values[j]));
    }
    EXPECT_LT(d, 0.25f) << "position " << i;
    over += d > 0.05f ? 1 : 0;
    if (glm::testing::argmax((*rows)[i].values) != glm::testing::argmax(want[i].values)) {
      EXPECT_LT(glm::testing::top2_margin(want[i].values), 0.1f) << "position " << i;
    }
  }
  EXPECT_LE(over, 1);
}

TEST(Glm47Flash, TinyQ8LogitsMatchLlamaCpp) { expect_tiny_q8_matches("cpu"); }
TEST(Glm47Flash, OnTheGpuTinyQ8LogitsMatchLlamaCpp) { expect_tiny_q8_matches("vulkan"); }

// Several sequences in one step (prefill rows of several tokens, a decode row) = each alone:
// every sequence's queries read only its own compressed rows.
TEST(Glm47Flash, BatchEqualsAlone) {
  model::testing::check_batch_equals_alone(tiny_flash(DType::kF32), DType::kF16);
}
TEST(Glm47Flash, OnTheGpuBatchEqualsAlone) {
  model::testing::check_batch_equals_alone(tiny_flash(DType::kF32), DType::kF16, "vulkan");
}

// A prompt's rows prefilled in one step equal the same rows prefilled after a cached prefix (a
// later chunk, n_past > 0: the next turn of a conversation, a chunked prefill) or one at a time.
void expect_chunks_equal_one_step(const std::string& device) {
  auto m = model::testing::load(tiny_flash(DType::kF32), 2, true, device);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ((*m)->device_name().substr(0, 3), device.substr(0, 3));
  const std::vector<int32_t> t = {17,  300, 5, 211, 42,  7,   150, 99,  1,  498,
                                  400, 64,  3, 255, 128, 460, 11,  222, 33, 444};
  const int n = static_cast<int>(t.size()), cut = 7;
  std::vector<int32_t> blocks = {0, 1, 2, 3, 4};
  auto rows = [&](const std::vector<std::pair<int, int>>& steps) {
    model::KvPool kv((*m)->config(), 5, 4, DType::kF32);
    std::vector<float> out;
    for (auto [from, count] : steps) {
      model::SeqInput in{t.data() + from, count, from, blocks.data(), 5, true};
      std::vector<float> step;
      EXPECT_TRUE((*m)->forward({in}, &kv, &step).ok());
      out.insert(out.end(), step.begin(), step.end());
    }
    return out;
  };
  const std::vector<float> whole = rows({{0, n}});
  const std::vector<float> split = rows({{0, cut}, {cut, n - cut}});
  std::vector<std::pair<int, int>> singles;
  for (int i = 0; i < n; ++i) singles.emplace_back(i, 1);
  const std::vector<float> one_by_one = rows(singles);
  ASSERT_EQ(whole.size(), split.size());
  ASSERT_EQ(whole.size(), one_by_one.size());
  float d_split = 0, d_single = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    d_split = std::max(d_split, std::fabs(whole[i] - split[i]));
    d_single = std::max(d_single, std::fabs(whole[i] - one_by_one[i]));
  }
  std::printf("prefix + chunk %.3g, one at a time %.3g\n", d_split, d_single);
  EXPECT_LT(d_split, 1e-4f);
  EXPECT_LT(d_single, 1e-4f);
}

TEST(Glm47Flash, AChunkAfterACachedPrefixEqualsOneStep) { expect_chunks_equal_one_step("cpu"); }
TEST(Glm47Flash, OnTheGpuAChunkAfterACachedPrefixEqualsOneStep) {
  expect_chunks_equal_one_step("vulkan");
}

// The latent attention's dispatches, from the device's profile of a 3-token prompt and two
// decode steps (model::testing::op_calls): a layer's one rotary (the query's; the K row's runs
// in the cache's store), one store, one K-row norm a step, and a copy only in the prompt (its
// nope rows gathered; a decode step's are wq_b's output as regrouped at upload, and the values
// are the attention's rows of kv_lora); the layers' norms run in the matmuls that read them
// (the final norm alone is a dispatch: one a step).
TEST(Glm47Flash, OnTheGpuADecodeStepsAttentionTakesOneRotaryAndNoCopy) {
  auto m = model::testing::load_on_gpu(tiny_flash(DType::kF32));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const uint64_t layers = static_cast<uint64_t>((*m)->config().n_layer), steps = 3;
  std::map<std::string, uint64_t> calls = model::testing::op_calls(**m, DType::kF16);
  EXPECT_EQ(calls["copy_rows"], layers);
  EXPECT_EQ(calls["rope"], steps * layers);
  EXPECT_EQ(calls["kv_store_f16"], steps * layers);
  EXPECT_EQ(calls["head_norm"], steps * layers);
  EXPECT_EQ(calls["rms_norm"], steps);
}

// --gpu-layers 1 and 2 of 3: the first layers on the CPU (their compressed rows in the pool's
// host memory), the rest on the GPU; and --cpu-moe 2 and all: the routed experts of the first
// two layers (the first is dense: one MoE layer's) or of every layer in host memory, run by the
// CPU mid-step: each equal to the CPU alone.
TEST(Glm47Flash, OnTheGpuLayerSplitsAndHostExpertsEqualTheCpu) {
  const std::vector<int32_t> prompt = {17, 300, 5, 211, 42, 7, 150, 99, 1, 498, 400, 64};
  const std::vector<int32_t> decode = {3, 255, 128};
  struct Case {
    std::string device;
    int gpu_layers, cpu_moe;
  };
  auto rows = [&](const Case& c) {
    auto f = gguf::File::open(tiny_flash(DType::kF32));
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    model::LoadOptions lo;
    lo.n_threads = 2;
    lo.device = c.device;
    lo.gpu_layers = c.gpu_layers;
    lo.cpu_moe = c.cpu_moe;
    auto m = model::load_model(std::shared_ptr<const gguf::File>(std::move(*f)), lo);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ((*m)->kv_host_layers(),
              c.device == "cpu" ? 3 : (c.gpu_layers < 0 ? 0 : 3 - c.gpu_layers));
    EXPECT_EQ((*m)->host_expert_bytes() > 0, c.device != "cpu" && c.cpu_moe != 0);
    model::EvalOptions o;
    o.kv_type = DType::kF16;
    o.block_tokens = 4;
    auto r = model::evaluate(**m, prompt, decode, o);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(*r);
  };
  const std::vector<model::EvalRow> cpu = rows({"cpu", -1, 0});
  for (const Case& c : {Case{"vulkan", 1, 0}, Case{"vulkan", 2, 0}, Case{"vulkan", -1, 2},
                        Case{"vulkan", -1, model::kAllLayers}}) {
    SCOPED_TRACE("--gpu-layers " + std::to_string(c.gpu_layers) + " --cpu-moe " +
                 std::to_string(c.cpu_moe));
    const std::vector<model::EvalRow> got = rows(c);
    ASSERT_EQ(got.size(), cpu.size());
    float d = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
      for (size_t j = 0; j < cpu[i].values.size(); ++j) {
        d = std::max(d, std::fabs(got[i].values[j] - cpu[i].values[j]));
      }
    }
    EXPECT_LT(d, 1e-3f);
  }
}

void expect_flash_refused(const std::string& path, ErrorCode code, const std::string& named) {
  auto m = model::testing::load(path, 2);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), code) << m.status().message();
  EXPECT_NE(m.status().message().find(named), std::string::npos) << m.status().message();
}

// What the CPU path does not run is refused by name: llama.cpp's older layout (no
// key_length_mla: an unsplit attn_kv_b), DeepSeek-V2's softmax routing, and a file whose
// widths disagree with its tensors.
TEST(Glm47Flash, FilesItCannotRunAreRefusedByName) {
  const std::string f32 = tiny_flash(DType::kF32);
  expect_flash_refused(glm::testing::edited_copy(f32, "flash-legacy.gguf", nullptr,
                                                 "deepseek2.attention.key_length_mla"),
                       ErrorCode::kUnsupported, "key_length_mla");
  expect_flash_refused(
      glm::testing::edited_copy(
          f32, "flash-softmax.gguf",
          [](gguf::Writer* w) { w->set("deepseek2.expert_gating_func", gguf::Value::u32(1)); }),
      ErrorCode::kUnsupported, "softmax");
  expect_flash_refused(glm::testing::edited_copy(f32, "flash-rank.gguf",
                                                 [](gguf::Writer* w) {
                                                   w->set("deepseek2.attention.kv_lora_rank",
                                                          gguf::Value::u32(96));
                                                 }),
                       ErrorCode::kBadFile, "kv_lora_rank");
  expect_flash_refused(
      glm::testing::edited_copy(f32, "flash-no-kb.gguf", nullptr, "blk.1.attn_k_b.weight"),
      ErrorCode::kBadFile, "blk.1.attn_k_b.weight");
}

// Any value of any of the latent attention's keys (and the shared ones it reads) either loads a
// model that runs, or gives an error: a hostile file never crashes the loader or the forward.
TEST(Glm47Flash, MetadataValuesNeverCrash) {
  const std::string src = tiny_flash(DType::kQ8_0);
  const std::vector<std::string> keys = {"attention.q_lora_rank",    "attention.kv_lora_rank",
                                         "attention.key_length",     "attention.value_length",
                                         "attention.key_length_mla", "attention.value_length_mla",
                                         "attention.head_count_kv",  "rope.dimension_count",
                                         "expert_gating_func",       "nextn_predict_layers"};
  // Each key's own value in the file is among them (it loads), and values that break it.
  const std::vector<uint32_t> values = {0, 1, 2, 32, 96, 128, 160, 0xffffffffu};
  int loaded = 0, failed = 0;
  for (const std::string& key : keys) {
    for (uint32_t value : values) {
      const std::string path = glm::testing::edited_copy(
          src, "flash-meta.gguf",
          [&](gguf::Writer* w) { w->set("deepseek2." + key, gguf::Value::u32(value)); });
      auto m = model::testing::load(path, 1);
      if (!m.ok()) {
        EXPECT_FALSE(m.status().message().empty()) << key << " = " << value;
        ++failed;
        continue;
      }
      ++loaded;
      model::KvPool kv((*m)->config(), 1, 4, DType::kF32);
      std::vector<int32_t> tokens = {1, 2}, blocks = {0};
      std::vector<float> out;
      model::SeqInput in{tokens.data(), 2, 0, blocks.data(), 1, true};
      ASSERT_TRUE((*m)->forward({in}, &kv, &out).ok()) << key << " = " << value;
      EXPECT_EQ(out.size(), 2u * (*m)->config().n_vocab);
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(failed, 0);
}

// Its chat format is GLM-4.7's (the only GLM in the deepseek2 layout).
TEST(Glm47Flash, SpeaksGlm47) {
  auto f = gguf::File::open(tiny_flash(DType::kF32));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto tok = tok::Tokenizer::from_gguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto t = tok::ChatTemplate::for_model(**f, **tok);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_STREQ((*t)->name(), "glm47");
}

// Greedy text with the file's MTP block drafting (--spec mtp) equals the text without, alone
// and four at once, on an engine (chunked prefill, batching, the block's own K/V of compressed
// rows).
void expect_mtp_text_equals_without(const std::string& device) {
  const std::vector<std::string> prompts = {"hello there", "write a poem", "what is 2+2",
                                            "tell me a story"};
  std::map<int, std::map<std::string, std::string>> got;
  int64_t drafted = 0;
  for (auto mode : {generation::SpecMode::kOff, generation::SpecMode::kMtp}) {
    engine::Options o;
    o.device = device;
    o.model_path = tiny_flash(DType::kF32);
    o.n_threads = 2;
    o.n_ctx = 512;
    o.max_batch = 4;
    o.prefill_chunk = 8;
    o.max_stall_ms = 0;
    o.spec = mode;
    auto e = engine::load_engine(o);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    engine::testing::EventLog log;
    for (size_t i = 0; i < prompts.size(); ++i) {
      engine::Request r;
      r.id = "f" + std::to_string(i);
      r.raw = true;
      r.prompt = prompts[i];
      r.params.temperature = 0.0f;
      r.params.max_tokens = 40;
      ASSERT_TRUE((*e)->submit(std::move(r), log.sink()).ok());
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string id = "f" + std::to_string(i);
      ASSERT_TRUE(log.wait(id)) << id;
      const engine::Event done = log.last(id);
      EXPECT_EQ(done.type, engine::EventType::kDone) << done.error.to_string();
      got[static_cast<int>(mode)][id] = log.text(id);
      if (mode == generation::SpecMode::kMtp) drafted += done.speculation.drafted;
    }
  }
  for (const auto& [id, text] : got[static_cast<int>(generation::SpecMode::kOff)]) {
    EXPECT_FALSE(text.empty()) << id;
    EXPECT_EQ(got[static_cast<int>(generation::SpecMode::kMtp)][id], text) << id;
  }
  EXPECT_GT(drafted, 0);
}

TEST(Glm47Flash, GreedyTextWithMtpDraftsEqualsWithout) { expect_mtp_text_equals_without("cpu"); }
// The MTP block on the device too (its layer's latent attention over its own K rows).
TEST(Glm47Flash, OnTheGpuGreedyTextWithMtpDraftsEqualsWithout) {
  expect_mtp_text_equals_without("vulkan");
}

// A conversation's K rows (the compressed rows: its cache holds no V half) saved to the KV disk
// cache by one engine are loaded by the next, whose second turn then prefills only its new
// tokens and answers as the same conversation continued in memory by one engine without the
// disk cache does.
// One conversation turn to its end: its start and final events and its text.
struct FlashTurn {
  engine::Event start, done;
  std::string text;
};

FlashTurn flash_turn(engine::Engine* e, const std::string& id,
                     const std::vector<tok::Message>& messages) {
  engine::Request r;
  r.id = id;
  r.conversation = "flash-conv";
  r.messages = messages;
  r.params.temperature = 0.0f;
  r.params.max_tokens = 12;
  r.enable_thinking = false;  // the answer is text (with thinking, GLM-4.7's starts inside it)
  engine::testing::EventLog log;
  const Status st = e->submit(r, log.sink());
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok() || !log.wait(id)) return {};
  return {log.first(id, engine::EventType::kStart), log.last(id), log.text(id)};
}

void expect_k_rows_back_from_the_disk_cache(const std::string& device) {
  const std::string dir = model::testing::temp_path("flash-kv-disk-" + device);
  auto flash_engine = [&](const std::string& disk) {
    engine::Options o;
    o.device = device;
    o.model_path = tiny_flash(DType::kF32);
    o.n_threads = 2;
    o.n_ctx = 512;
    o.kv_disk = disk;
    auto e = engine::load_engine(o);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? std::move(*e) : nullptr;
  };
  std::vector<tok::Message> m = {{"user", "tell me a story about a long road home"}};
  std::string answer;
  {
    auto first = flash_engine(dir);
    ASSERT_NE(first, nullptr);
    const FlashTurn t = flash_turn(first.get(), "t1", m);
    ASSERT_EQ(t.done.type, engine::EventType::kDone) << t.done.error.to_string();
    answer = t.text;
  }
  m.push_back({"assistant", answer});
  m.push_back({"user", "and then?"});
  auto second = flash_engine(dir);
  ASSERT_NE(second, nullptr);
  const FlashTurn resumed = flash_turn(second.get(), "t2", m);
  ASSERT_EQ(resumed.done.type, engine::EventType::kDone) << resumed.done.error.to_string();
  EXPECT_GT(resumed.start.usage.cached_tokens, 16) << "the first turn's blocks were not reused";
  auto plain = flash_engine("");
  ASSERT_NE(plain, nullptr);
  flash_turn(plain.get(), "t3", {m.front()});
  const FlashTurn in_memory = flash_turn(plain.get(), "t4", m);
  EXPECT_EQ(in_memory.start.usage.cached_tokens, resumed.start.usage.cached_tokens);
  EXPECT_EQ(resumed.text, in_memory.text);
  EXPECT_FALSE(resumed.text.empty());
}

TEST(Glm47Flash, AConversationsKRowsComeBackFromTheDiskCache) {
  expect_k_rows_back_from_the_disk_cache("cpu");
}
// From the device's cache (one part a layer: GpuModel::block_io) to the disk and back.
TEST(Glm47Flash, OnTheGpuAConversationsKRowsComeBackFromTheDiskCache) {
  expect_k_rows_back_from_the_disk_cache("vulkan");
}

}  // namespace
}  // namespace glm
