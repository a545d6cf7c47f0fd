// Encode throughput (MB/s) on mixed Chinese/English text: our tokenizers vs libsentencepiece
// on the same ChatGLM3 model, side by side in one run. Also GLM-4 byte-level BPE.
//   build/src/tokenizer/tokenizer_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true     (one command line)
// Needs ../shared/data (skips a benchmark whose file is absent).
#include <benchmark/benchmark.h>
#include <sentencepiece_processor.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string shared(const char* rel) { return std::string(GLM_SHARED_DATA) + "/" + rel; }

// ~64 KB of mixed text: sentences in Chinese, English and both, shuffled with a fixed seed.
const std::string& corpus() {
  static const std::string text = [] {
    const char* sentences[] = {
        "今天我们来讨论一下如何在本地的CPU上高效地运行大语言模型。",
        "The quick brown fox jumps over the lazy dog while the engine streams tokens.",
        "量化可以把模型的权重从16位压缩到4位，从而大大减少内存带宽的占用。",
        "In practice, the time to first token depends mostly on prompt processing speed.",
        "请帮我写一段Python代码，读取一个CSV文件并统计每一列的平均值。",
        "def mean(xs):\n    return sum(xs) / len(xs)  # average of a list\n",
        "ChatGLM3-6B 是一个开源的中英双语对话模型，支持工具调用和代码解释器。",
        "Multi-turn conversations reuse their KV cache, so a new turn only prefills new tokens.",
        "北京的天气怎么样？明天会下雨吗？我需要带伞吗？",
        "Error: the prompt is 9000 tokens; the context is 8192 (raise --ctx-size).",
        "我们在2024年6月1日发布了新版本，性能提升了约35%。",
        "Tokenizers turn text into integer ids; detokenizers must never split a UTF-8 character.",
        "这段营销文案需要突出产品的三个卖点：速度快、成本低、部署简单。",
        "{\"role\": \"user\", \"content\": \"你好，请介绍一下你自己。\"}",
        "   Indented lines,\ttabs and\n\nblank lines are kept exactly as they are.   ",
        "人工智能助手应当准确、简洁地回答用户的问题，并在不确定时说明。",
    };
    const size_t n = sizeof(sentences) / sizeof(sentences[0]);
    std::mt19937 rng(42);
    std::string s;
    while (s.size() < 64 * 1024) {
      s += sentences[rng() % n];
      s += (rng() % 4 == 0) ? "\n" : " ";
    }
    return s;
  }();
  return text;
}

struct Loaded {
  std::unique_ptr<glm::gguf::File> file;
  std::unique_ptr<glm::tok::Tokenizer> tok;
};

Loaded load(const std::string& path) {
  Loaded l;
  if (access(path.c_str(), R_OK) != 0) return l;
  auto f = glm::gguf::File::open(path);
  if (!f.ok()) return l;
  auto t = glm::tok::Tokenizer::from_gguf(**f);
  if (!t.ok()) return l;
  l.file = std::move(f.value());
  l.tok = std::move(t.value());
  return l;
}

void BM_Ours_ChatGLM3(benchmark::State& state) {
  static Loaded l = load(shared("vocab/chatglm3-vocab.gguf"));
  if (!l.tok) return state.SkipWithError("vocab/chatglm3-vocab.gguf is absent");
  const std::string& text = corpus();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = l.tok->encode(text);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

void BM_SentencePiece_ChatGLM3(benchmark::State& state) {
  static sentencepiece::SentencePieceProcessor sp;
  static bool ok = sp.Load(shared("tokenizers/chatglm3.tokenizer.model")).ok();
  if (!ok) return state.SkipWithError("tokenizers/chatglm3.tokenizer.model is absent");
  const std::string& text = corpus();
  size_t n = 0;
  for (auto _ : state) {
    std::vector<int> ids;
    sp.Encode(text, &ids);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

void BM_Ours_GLM4(benchmark::State& state) {
  static Loaded l = load(shared("vocab/glm4-vocab.gguf"));
  if (!l.tok) return state.SkipWithError("vocab/glm4-vocab.gguf is absent");
  const std::string& text = corpus();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = l.tok->encode(text);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

// Side by side: the two ChatGLM3 benchmarks alternate.
BENCHMARK(BM_Ours_ChatGLM3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SentencePiece_ChatGLM3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Ours_GLM4)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
