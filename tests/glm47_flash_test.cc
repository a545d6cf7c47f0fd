// GLM-4.7-Flash (llama.cpp's `deepseek2` layout: multi-head latent attention, glm4moe's experts)
// against llama.cpp: the logits a libllama program printed for `gen-model --arch glm47-flash
// --preset tiny` files (tests/data/glm47-flash/README.md). The files are regenerated here from
// their seed. The tiny preset keeps the real attention's structure (a query rank, a compressed
// K/V row with a rotary part, per-head key and value expansions) at small widths, so a wrong
// absorption, norm, rotary pairing, scale or value expansion moves these logits.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "llama_reference.h"
#include "model/batch_test_util.h"
#include "model/eval.h"
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

TEST(Glm47Flash, TinyF32LogitsMatchLlamaCpp) {
  Compare c = glm::testing::compare_with_reference(
      tiny_flash(DType::kF32), flash_data("tiny-f32.logits.jsonl"), kPrefill, DType::kF32);
  std::printf("glm47-flash tiny f32: max |diff| %.3g (max |logit| %.3g), argmax mismatches %d\n",
              c.max_diff, c.max_abs, c.argmax_mismatches);
  EXPECT_LT(c.max_diff, 1e-4f);
  EXPECT_GT(c.max_abs, 0.5f);  // logits that mean something
  EXPECT_EQ(c.argmax_mismatches, 0);
}

// An F16 cache of the compressed rows, against the F32-KV reference: ../shared/data's 5e-3.
TEST(Glm47Flash, TinyF32LogitsF16KvWithinTolerance) {
  Compare c = glm::testing::compare_with_reference(
      tiny_flash(DType::kF32), flash_data("tiny-f32.logits.jsonl"), kPrefill, DType::kF16);
  EXPECT_LT(c.max_diff, 5e-3f);
  EXPECT_EQ(c.clear_argmax_mismatches, 0);
}

// Q8_0 weights: both sides round the activations to 8 bits their own way (0.05, as glm4moe's
// tiny file). One decode position (18) chooses another expert on that rounding (its router's
// top two are that close): 0.17 there, so it is bounded by 0.25 and every other position by
// the quantized tolerance; no answer token differs clearly.
TEST(Glm47Flash, TinyQ8LogitsMatchLlamaCpp) {
  const std::vector<model::testing::JsonRow> want =
      model::testing::read_jsonl(flash_data("tiny-q8_0.logits.jsonl"));
  ASSERT_EQ(want.size(), 20u);
  std::vector<int32_t> prompt, decode;
  for (size_t i = 0; i < want.size(); ++i) {
    (static_cast<int>(i) < kPrefill ? prompt : decode).push_back(want[i].token);
  }
  auto m = model::testing::load(tiny_flash(DType::kQ8_0), 2);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
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

// Several sequences in one step (prefill rows of several tokens, a decode row) = each alone:
// every sequence's queries read only its own compressed rows.
TEST(Glm47Flash, BatchEqualsAlone) {
  model::testing::check_batch_equals_alone(tiny_flash(DType::kF32), DType::kF16);
}

// The latent attention runs on the CPU only so far: asked for by name, the GPU is refused with
// the reason; auto runs it on the CPU.
TEST(Glm47Flash, TheGpuIsRefusedByNameAndAutoRunsOnTheCpu) {
  auto gpu = model::testing::load(tiny_flash(DType::kF32), 2, true, "vulkan");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(gpu.status().message().find("CPU only"), std::string::npos) << gpu.status().message();
  auto any = model::testing::load(tiny_flash(DType::kF32), 2, true, "auto");
  ASSERT_TRUE(any.ok()) << any.status().to_string();
  EXPECT_EQ((*any)->device_name(), "cpu");
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
struct FlashCollected {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> text;
  std::map<std::string, engine::Event> done;
  engine::EventSink sink() {
    return [this](const engine::Event& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.type == engine::EventType::kToken) text[ev.id] += ev.text;
      if (ev.type == engine::EventType::kDone || ev.type == engine::EventType::kError) {
        done[ev.id] = ev;
      }
      cv.notify_all();
    };
  }
};

TEST(Glm47Flash, GreedyTextWithMtpDraftsEqualsWithout) {
  const std::vector<std::string> prompts = {"hello there", "write a poem", "what is 2+2",
                                            "tell me a story"};
  std::map<int, std::map<std::string, std::string>> got;
  int64_t drafted = 0;
  for (auto mode : {generation::SpecMode::kOff, generation::SpecMode::kMtp}) {
    engine::Options o;
    o.device = "cpu";
    o.model_path = tiny_flash(DType::kF32);
    o.n_threads = 2;
    o.n_ctx = 512;
    o.max_batch = 4;
    o.prefill_chunk = 8;
    o.max_stall_ms = 0;
    o.spec = mode;
    auto e = engine::load_engine(o);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    FlashCollected c;
    for (size_t i = 0; i < prompts.size(); ++i) {
      engine::Request r;
      r.id = "f" + std::to_string(i);
      r.raw = true;
      r.prompt = prompts[i];
      r.params.temperature = 0.0f;
      r.params.max_tokens = 40;
      ASSERT_TRUE((*e)->submit(std::move(r), c.sink()).ok());
    }
    std::unique_lock<std::mutex> lock(c.mu);
    ASSERT_TRUE(c.cv.wait_for(lock, std::chrono::seconds(120),
                              [&] { return c.done.size() == prompts.size(); }));
    for (const auto& [id, ev] : c.done) {
      EXPECT_EQ(ev.type, engine::EventType::kDone) << ev.error.to_string();
      got[static_cast<int>(mode)][id] = c.text[id];
      if (mode == generation::SpecMode::kMtp) drafted += ev.speculation.drafted;
    }
  }
  for (const auto& [id, text] : got[static_cast<int>(generation::SpecMode::kOff)]) {
    EXPECT_FALSE(text.empty()) << id;
    EXPECT_EQ(got[static_cast<int>(generation::SpecMode::kMtp)][id], text) << id;
  }
  EXPECT_GT(drafted, 0);
}

}  // namespace
}  // namespace glm
