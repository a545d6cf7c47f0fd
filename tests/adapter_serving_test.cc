// Adapters served by name in the engine (docs/adapters.md): a request's `adapter` selects one,
// its greedy answer is the one the model gives with that adapter (checked token by token against
// model::Model::forward with the adapter, itself checked against llama.cpp in
// lora_reference_test.cc), the prefix cache never lends one adapter's KV to another, an unknown
// name is not_found, and loading and unloading adapters while requests run loses none of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "convert/gen_model.h"
#include "convert/lora_file.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/ptuning_test_util.h"
#include "model/test_util.h"

namespace glm {
namespace {

std::string tiny_model() {
  const std::string path = model::testing::temp_path("serving-chatglm3-tiny.gguf");
  if (!model::testing::file_exists(path)) {
    convert::GenOptions o;
    o.family = convert::Family::kChatGLM3;
    o.preset = "tiny";
    o.type = DType::kF32;
    o.seed = 3;
    EXPECT_TRUE(convert::generate_model(o, path, nullptr).ok());
  }
  return path;
}

// ChatGLM-6B (v1): gen-model --arch chatglm1 --preset tiny.
std::string tiny_v1_model() {
  const std::string path = model::testing::temp_path("serving-chatglm1-tiny.gguf");
  if (!model::testing::file_exists(path)) {
    convert::GenOptions o;
    o.family = convert::Family::kChatGLM1;
    o.preset = "tiny";
    o.type = DType::kF32;
    o.seed = 3;
    EXPECT_TRUE(convert::generate_model(o, path, nullptr).ok());
  }
  return path;
}

std::string lora(uint64_t seed) {
  const std::string path = model::testing::temp_path("serving-a" + std::to_string(seed) + ".gguf");
  if (!model::testing::file_exists(path)) {
    auto f = gguf::File::open(tiny_model());
    EXPECT_TRUE(f.ok());
    auto l = convert::random_lora(**f, 8, 32.0f, seed);
    EXPECT_TRUE(l.ok());
    EXPECT_TRUE(convert::write_lora_file(*l, DType::kF32, path).ok());
  }
  return path;
}

struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, engine::Event> start, done;
  engine::EventSink sink() {
    return [this](const engine::Event& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (e.type == generation::EventType::kToken) {
        auto& t = tokens[e.id];
        t.insert(t.end(), e.tokens.begin(), e.tokens.end());
      }
      if (e.type == generation::EventType::kStart) start[e.id] = e;
      if (e.type == generation::EventType::kDone || e.type == generation::EventType::kError) {
        done[e.id] = e;
      }
      cv.notify_all();
    };
  }
  bool wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(120), [&] { return done.count(id) > 0; });
  }
};

constexpr int kMaxTokens = 6;

// The engine's answer is the direct greedy run's, up to where the engine stopped (a stop id).
bool same_answer(const std::vector<int32_t>& engine, const std::vector<int32_t>& direct) {
  return !engine.empty() && engine.size() <= direct.size() &&
         std::equal(engine.begin(), engine.end(), direct.begin());
}

engine::Request raw_request(const std::string& id, const std::string& adapter,
                            const std::string& text) {
  engine::Request r;
  r.id = id;
  r.raw = true;
  r.prompt = text;
  r.adapter = adapter;
  r.params.temperature = 0.0f;
  r.params.max_tokens = kMaxTokens;
  return r;
}

std::unique_ptr<engine::Engine> load(std::vector<engine::AdapterSpec> adapters, int max_batch = 4,
                                     const std::string& model_path = tiny_model(),
                                     const std::string& device = "cpu") {
  engine::Options o;
  o.device = device;
  o.model_path = model_path;
  o.n_threads = 2;
  o.n_ctx = 256;
  o.max_batch = max_batch;
  o.adapters = std::move(adapters);
  auto e = engine::load_engine(o);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(*e) : nullptr;
}

// The greedy continuation of `prompt` computed with the model directly (no engine), with the
// adapter or without.
std::vector<int32_t> direct_greedy(const std::vector<int32_t>& prompt, const std::string& path,
                                   const std::string& model_path = tiny_model()) {
  auto m = model::testing::load(model_path, 2);
  EXPECT_TRUE(m.ok());
  std::shared_ptr<const model::Adapter> a;
  if (!path.empty()) {
    auto l = model::load_adapter(path, (*m)->config(), 1.0f, "direct");
    EXPECT_TRUE(l.ok());
    a = *l;
  }
  model::KvPool kv((*m)->config(), 16, 16, DType::kF32);
  std::vector<int32_t> blocks(16);
  for (int b = 0; b < 16; ++b) blocks[b] = b;
  std::vector<int32_t> out, feed = prompt;
  int n_past = 0;
  for (int step = 0; step < kMaxTokens; ++step) {
    std::vector<float> logits;
    model::SeqInput in{feed.data(), static_cast<int>(feed.size()), n_past, blocks.data(), 16};
    in.prefix_len = static_cast<int>(prompt.size());  // ChatGLM-6B's prompt; others ignore it
    in.adapter = a.get();
    EXPECT_TRUE((*m)->forward({in}, &kv, &logits).ok());
    n_past += static_cast<int>(feed.size());
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    feed = {next};
  }
  return out;
}

// On `device`: LoRA adapters selected by name in one batch answer as the model run directly on
// the CPU with each (or none).
void expect_names_select_adapters(const std::string& device) {
  auto e = load({{"a1", lora(1), 1.0f}, {"a2", lora(2), 1.0f}}, 4, tiny_model(), device);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->device().substr(0, 3), device.substr(0, 3));
  // The raw prompt's ids as the engine tokenizes them, to run the same ids directly.
  const std::string text = "hello adapters, one two three four five six seven";
  engine::Request probe = raw_request("probe", "", text);
  auto ids = e->prompt_tokens(probe);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  Results res;
  const std::string base = e->model_name();
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"base", ""}, {"a1", "a1"}, {"a2", "a2"}, {"a2-by-base", base + ":a2"}};
  for (const auto& [id, adapter] : runs) {  // together: one batch holds all of them
    ASSERT_TRUE(e->submit(raw_request(id, adapter, text), res.sink()).ok()) << id;
  }
  // The client's model name (GenerateRequest::model, what the gateway sends): an adapter served
  // under it, else the bare model, whatever the name.
  const std::vector<std::pair<std::string, std::string>> by_model = {
      {"a1-by-model", "a1"}, {"gpt-by-model", "gpt-4o"}, {"base-by-model", base}};
  for (const auto& [id, model] : by_model) {
    engine::Request r = raw_request(id, "", text);
    r.model = model;
    ASSERT_TRUE(e->submit(r, res.sink()).ok()) << id;
  }
  for (const auto& [id, model] : by_model) {
    ASSERT_TRUE(res.wait(id)) << id;
    ASSERT_EQ(res.done[id].type, generation::EventType::kDone) << res.done[id].error.to_string();
  }
  for (const auto& [id, adapter] : runs) {
    ASSERT_TRUE(res.wait(id)) << id;
    ASSERT_EQ(res.done[id].type, generation::EventType::kDone) << res.done[id].error.to_string();
  }
  EXPECT_TRUE(same_answer(res.tokens["base"], direct_greedy(*ids, "")));
  EXPECT_TRUE(same_answer(res.tokens["a1"], direct_greedy(*ids, lora(1))));
  EXPECT_TRUE(same_answer(res.tokens["a2"], direct_greedy(*ids, lora(2))));
  EXPECT_EQ(res.tokens["a2-by-base"], res.tokens["a2"]);
  EXPECT_EQ(res.tokens["a1-by-model"], res.tokens["a1"]);
  EXPECT_EQ(res.tokens["gpt-by-model"], res.tokens["base"]);
  EXPECT_EQ(res.tokens["base-by-model"], res.tokens["base"]);
  EXPECT_NE(res.tokens["a1"], res.tokens["base"]);
  EXPECT_NE(res.tokens["a1"], res.tokens["a2"]);

  Status s = e->submit(raw_request("unknown", base + ":nope", text), res.sink());
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("adapter '" + base + ":nope' is not served here; served: a1, a2"),
            std::string::npos)
      << s.message();
  e->drain(std::chrono::seconds(10));
}

TEST(AdapterServing, NamesSelectAdaptersAndMatchTheModelDirectly) {
  expect_names_select_adapters("cpu");
}

// The same on the GPU (LoRA per request there: transformer_gpu.h), against the CPU's answers.
TEST(AdapterServing, OnTheGpuNamesSelectAdaptersAndMatchTheCpu) {
  expect_names_select_adapters("vulkan");
}

// ChatGLM-6B (v1) has no LoRA: its engine refuses to load one, saying so; nothing is served
// under the name.
TEST(AdapterServing, AChatGLM1LoraIsRefusedAtLoadByName) {
  const std::string path = model::testing::temp_path("serving-v1-lora.gguf");
  {
    auto f = gguf::File::open(tiny_v1_model());
    ASSERT_TRUE(f.ok());
    auto l = convert::random_lora(**f, 4, 8.0f, 5);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    ASSERT_TRUE(convert::write_lora_file(*l, DType::kF32, path).ok());
  }
  auto e = load({}, 4, tiny_v1_model());
  ASSERT_NE(e, nullptr);
  const Status s = e->load_adapter({"v1lora", path, 1.0f});
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("LoRA on ChatGLM-6B (v1) is not supported"), std::string::npos)
      << s.message();
  EXPECT_TRUE(e->adapters().empty());
}

// A P-Tuning v2 adapter served by name (the lead's merge of the two branches): the answer is
// the model's own with the prefix, the prefix costs no prefill (the request's prompt is its own
// tokens, and a repeat reuses all of them), and its KV is never lent to the bare model.
// On `device`: a P-Tuning prefix served by name answers as the model run directly on the CPU
// with it; the prefix is not prompt and its KV is never lent to the bare model.
void expect_ptuning_served_by_name(const std::string& device) {
  auto f = gguf::File::open(tiny_model());
  ASSERT_TRUE(f.ok());
  auto config = model::read_config(**f);
  ASSERT_TRUE(config.ok());
  model::testing::PtuningSpec spec;
  spec.n_layer = config->n_layer;
  spec.kv_dim = config->kv_dim();
  spec.pre_seq_len = 6;
  spec.std = 2.0f;  // strong enough to change the answer
  const std::string pt = model::testing::temp_path("serving-pt.gguf");
  ASSERT_TRUE(
      model::testing::write_ptuning_gguf(spec, model::testing::random_ptuning(spec), pt).ok());
  auto e = load({{"pt", pt, 1.0f}}, 1, tiny_model(), device);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->device().substr(0, 3), device.substr(0, 3));
  const std::string text = "a prompt read with and without the prefix";
  auto ids = e->prompt_tokens(raw_request("probe", "", text));
  ASSERT_TRUE(ids.ok());
  const std::vector<int32_t> with = direct_greedy(*ids, pt), without = direct_greedy(*ids, "");
  ASSERT_NE(with, without) << "the prefix changes nothing: the test could not tell";
  Results res;
  for (const auto& [id, adapter] :
       std::vector<std::pair<std::string, std::string>>{{"p1", "pt"}, {"p2", "pt"}, {"b1", ""}}) {
    ASSERT_TRUE(e->submit(raw_request(id, adapter, text), res.sink()).ok());
    ASSERT_TRUE(res.wait(id));
    ASSERT_EQ(res.done[id].type, generation::EventType::kDone) << res.done[id].error.to_string();
  }
  EXPECT_TRUE(same_answer(res.tokens["p1"], with));
  EXPECT_EQ(res.tokens["p2"], res.tokens["p1"]);
  EXPECT_TRUE(same_answer(res.tokens["b1"], without));
  const int n = static_cast<int>(ids->size());
  EXPECT_EQ(res.done["p1"].usage.prompt_tokens, n);  // the prefix is not prompt: not prefilled
  EXPECT_EQ(res.start["p1"].usage.cached_tokens, 0);
  // p2 repeats p1 whole: every token from the cache, the first token from the logits kept.
  EXPECT_EQ(res.start["p2"].usage.cached_tokens, n);
  EXPECT_EQ(res.start["b1"].usage.cached_tokens, 0) << "the base must not read prefixed KV";
  e->drain(std::chrono::seconds(10));
}

TEST(AdapterServing, APtuningPrefixServedByNameCostsNoPrefill) {
  expect_ptuning_served_by_name("cpu");
}

TEST(AdapterServing, OnTheGpuAPtuningPrefixServedByNameCostsNoPrefill) {
  expect_ptuning_served_by_name("vulkan");
}

// ChatGLM-6B (v1)'s P-Tuning adapter served by name as ChatGLM2/3's is: run together with a
// request to the bare model (one batch), each answer is the model's own with its prefix or
// without, and the prefix is not prompt (ChatGLM-6B reuses no KV: nothing is cached).
TEST(AdapterServing, AChatGLM1PtuningPrefixIsServedByName) {
  auto f = gguf::File::open(tiny_v1_model());
  ASSERT_TRUE(f.ok());
  auto config = model::read_config(**f);
  ASSERT_TRUE(config.ok());
  ASSERT_EQ(config->arch, model::Arch::kChatGLM1);
  model::testing::PtuningSpec spec;
  spec.arch = "chatglm1";
  spec.n_layer = config->n_layer;
  spec.kv_dim = config->kv_dim();  // hidden_size: ChatGLM-6B's K/V rows are all heads
  spec.pre_seq_len = 6;
  // Strong enough to change the answer: v1's residual LN(x) * sqrt(56) dwarfs the attention of
  // a random tiny model, which 2.0 (ChatGLM2/3's test above) does not move.
  spec.std = 20.0f;
  const std::string pt = model::testing::temp_path("serving-v1-pt.gguf");
  ASSERT_TRUE(
      model::testing::write_ptuning_gguf(spec, model::testing::random_ptuning(spec), pt).ok());
  auto e = load({{"v1pt", pt, 1.0f}}, 2, tiny_v1_model());
  ASSERT_NE(e, nullptr);
  const std::string text = "a prompt read with and without the prefix";
  auto ids = e->prompt_tokens(raw_request("probe", "", text));
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  const std::vector<int32_t> with = direct_greedy(*ids, pt, tiny_v1_model());
  const std::vector<int32_t> without = direct_greedy(*ids, "", tiny_v1_model());
  ASSERT_NE(with, without) << "the prefix changes nothing: the test could not tell";
  Results res;
  const std::vector<std::pair<std::string, std::string>> runs = {{"p1", "v1pt"}, {"b1", ""}};
  for (const auto& [id, adapter] : runs) {
    ASSERT_TRUE(e->submit(raw_request(id, adapter, text), res.sink()).ok()) << id;
  }
  for (const auto& [id, adapter] : runs) {
    ASSERT_TRUE(res.wait(id)) << id;
    ASSERT_EQ(res.done[id].type, generation::EventType::kDone) << res.done[id].error.to_string();
  }
  EXPECT_TRUE(same_answer(res.tokens["p1"], with));
  EXPECT_TRUE(same_answer(res.tokens["b1"], without));
  EXPECT_NE(res.tokens["p1"], res.tokens["b1"]);
  const int n = static_cast<int>(ids->size());
  EXPECT_EQ(res.done["p1"].usage.prompt_tokens, n);  // the prefix is not prompt: not prefilled
  EXPECT_EQ(res.start["p1"].usage.cached_tokens, 0);
  e->drain(std::chrono::seconds(10));
}

// The prefix cache keys blocks by adapter: a prompt the bare model ran is not reused by an
// adapter (its K/V differ), while the adapter's own second run reuses its first.
TEST(AdapterServing, PrefixCacheIsNeverSharedAcrossAdapters) {
  auto e = load({{"a1", lora(1), 1.0f}}, 1);
  ASSERT_NE(e, nullptr);
  const std::string text =
      "a long enough prompt so that several full blocks of sixteen tokens are cached and offered "
      "to the next request with the same beginning, whatever adapter it names";
  Results res;
  for (const auto& [id, adapter] : std::vector<std::pair<std::string, std::string>>{
           {"b1", ""}, {"x1", "a1"}, {"x2", "a1"}, {"b2", ""}}) {
    ASSERT_TRUE(e->submit(raw_request(id, adapter, text), res.sink()).ok());
    ASSERT_TRUE(res.wait(id));
  }
  EXPECT_EQ(res.start["x1"].usage.cached_tokens, 0) << "a1 must not reuse the base's blocks";
  EXPECT_GT(res.start["x2"].usage.cached_tokens, 16);
  EXPECT_GT(res.start["b2"].usage.cached_tokens, 16);
  EXPECT_EQ(res.tokens["x1"], res.tokens["x2"]);
  EXPECT_EQ(res.tokens["b1"], res.tokens["b2"]);
  e->drain(std::chrono::seconds(10));
}

// Requests of a1, a2 and the base keep coming while a2 is unloaded and loaded again and a3 is
// loaded: every request accepted ends with its full answer, each equal to its adapter's answer
// alone; a request for an adapter that is not loaded at that moment is refused at submit
// (not_found), never lost or run with the wrong weights.
TEST(AdapterServing, LoadAndUnloadUnderLoadLosesNoRequest) {
  auto e = load({{"a1", lora(1), 1.0f}, {"a2", lora(2), 1.0f}});
  ASSERT_NE(e, nullptr);
  const std::string text = "under load";
  engine::Request probe = raw_request("probe", "", text);
  auto ids = e->prompt_tokens(probe);
  ASSERT_TRUE(ids.ok());
  const std::map<std::string, std::vector<int32_t>> want = {{"", direct_greedy(*ids, "")},
                                                            {"a1", direct_greedy(*ids, lora(1))},
                                                            {"a2", direct_greedy(*ids, lora(2))},
                                                            {"a3", direct_greedy(*ids, lora(3))}};
  Results res;
  std::mutex mu;
  std::map<std::string, std::string> accepted;  // id -> adapter
  int refused = 0;
  std::atomic<bool> stop{false};
  std::thread client([&] {
    const char* names[] = {"", "a1", "a2", "a3"};
    for (int i = 0; i < 48; ++i) {
      const std::string id = "r" + std::to_string(i);
      const std::string adapter = names[i % 4];
      Status s = e->submit(raw_request(id, adapter, text), res.sink());
      std::lock_guard<std::mutex> lock(mu);
      if (s.ok()) {
        accepted[id] = adapter;
      } else {
        EXPECT_EQ(s.code(), ErrorCode::kNotFound) << s.to_string();
        ++refused;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stop = true;
  });
  int cycles = 0;
  while (!stop) {
    EXPECT_TRUE(e->unload_adapter("a2").ok());
    EXPECT_TRUE(e->load_adapter({"a3", lora(3), 1.0f}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(e->load_adapter({"a2", lora(2), 1.0f}).ok());
    EXPECT_TRUE(e->unload_adapter("a3").ok());
    ++cycles;
  }
  client.join();
  EXPECT_GT(cycles, 1);
  EXPECT_FALSE(e->unload_adapter("nope").ok());
  EXPECT_FALSE(e->load_adapter({"a1", lora(1), 1.0f}).ok()) << "a name already served";
  for (const auto& [id, adapter] : accepted) {
    ASSERT_TRUE(res.wait(id)) << id;
    ASSERT_EQ(res.done[id].type, generation::EventType::kDone) << id;
    EXPECT_TRUE(same_answer(res.tokens[id], want.at(adapter)))
        << id << " (adapter '" << adapter << "')";
  }
  std::printf(
      "under load: %zu requests accepted and answered, %d refused (adapter not loaded), "
      "%d load/unload cycles\n",
      accepted.size(), refused, cycles);
  EXPECT_GE(accepted.size(), 24u);
  e->drain(std::chrono::seconds(10));
}

}  // namespace
}  // namespace glm
