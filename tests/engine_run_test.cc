// `glmserve run` and `glmserve chat` as processes, on real models of ../shared/data:
// the stories260K greedy continuation must equal llama.cpp's byte for byte, and a piped chat
// must reuse the KV cache of earlier turns.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_util.h"

namespace {

using glm::testing::CliOutput;
using glm::testing::exists;
using glm::testing::run_glmserve;
using glm::testing::shared;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(EngineRun, StoriesGreedyContinuationMatchesLlamaCpp) {
  const std::string model = shared("models/stories260K.gguf");
  const std::string golden = shared("models/stories260K.greedy.json");
  if (!exists(model) || !exists(golden)) GTEST_SKIP() << model << " or its golden is absent";
  const auto g = nlohmann::json::parse(slurp(golden));
  const CliOutput r =
      run_glmserve({"run", "--model", model, "--prompt", g["prompt"].get<std::string>(), "-n",
                    std::to_string(g["n_new"].get<int>()), "--temp", "0", "--raw", "-t", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, g["text"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("64 tokens generated"), std::string::npos) << r.err;
}

// llama-cli's short names, which its users type first: -m for --model, -p for --prompt, -c for
// --ctx-size, -ngl for --gpu-layers (and -n, -t as before); the same text as the long names give.
TEST(EngineRun, LlamaCliShortNamesAreTheLongFlags) {
  const std::string model = shared("models/stories260K.gguf");
  const std::string golden = shared("models/stories260K.greedy.json");
  if (!exists(model) || !exists(golden)) GTEST_SKIP() << model << " or its golden is absent";
  const auto g = nlohmann::json::parse(slurp(golden));
  const CliOutput r =
      run_glmserve({"run", "-m", model, "-p", g["prompt"].get<std::string>(), "-n", "16", "-c",
                    "300", "-ngl", "0", "--temp", "0", "--raw", "-t", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The first 16 of the golden's tokens: its text begins with this one.
  ASSERT_GT(r.out.size(), 1u);
  EXPECT_EQ(g["text"].get<std::string>().rfind(r.out.substr(0, r.out.size() - 1), 0), 0u) << r.out;
  EXPECT_NE(r.err.find("16 tokens generated"), std::string::npos) << r.err;
  // -c is --ctx-size: the 5-token prompt does not fit a context of 2, which the error names.
  const CliOutput small = run_glmserve(
      {"run", "-m", model, "-p", g["prompt"].get<std::string>(), "-c", "2", "--raw", "-t", "1"});
  EXPECT_EQ(small.code, 1);
  EXPECT_NE(small.err.find("this server's context is 2 tokens"), std::string::npos) << small.err;
}

// The model as a lone argument (glmserve serve M.gguf, as Ollama's and llama.cpp's users type it)
// on serve, chat, engine and bench engine; a second one, or one beside --model, is named.
TEST(EngineRun, TheModelAloneIsTheModelFlag) {
  const std::string model = shared("models/stories260K.gguf");
  if (!exists(model)) GTEST_SKIP() << model << " is absent";
  CliOutput r = run_glmserve(
      {"bench", "engine", model, "-p", "8", "-n", "4", "-r", "1", "--bw-mb", "0", "-t", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tg4"), std::string::npos) << r.out;
  r = run_glmserve({"serve", model, "b.gguf"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unexpected argument 'b.gguf'"), std::string::npos) << r.err;
  r = run_glmserve({"engine", "--model", model, "--socket", "/tmp/unused.sock", "y.gguf"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unexpected argument 'y.gguf'"), std::string::npos) << r.err;
  r = run_glmserve({"chat", "/nonexistent/m.gguf"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("/nonexistent/m.gguf"), std::string::npos) << r.err;
}

// --kv q8_0 (and its alias --kv-type) on run: the engine says the type, and the greedy text of
// stories260K stays llama.cpp's (f32 KV) for its whole first sentence or more; an unknown type
// is refused by name.
TEST(EngineRun, KvQ8_0RunsAndItsAliasIsTheSameFlag) {
  const std::string model = shared("models/stories260K.gguf");
  const std::string golden = shared("models/stories260K.greedy.json");
  if (!exists(model) || !exists(golden)) GTEST_SKIP() << model << " or its golden is absent";
  const auto g = nlohmann::json::parse(slurp(golden));
  auto args = [&](const std::string& flag, const std::string& type) {
    return std::vector<std::string>{
        "run", "--model", model,    "--prompt", g["prompt"].get<std::string>(),
        "-n",  "64",      "--temp", "0",        "--raw",
        "-t",  "1",       flag,     type};
  };
  const CliOutput q8 = run_glmserve(args("--kv", "q8_0"));
  ASSERT_EQ(q8.code, 0) << q8.err;
  EXPECT_NE(q8.err.find("tokens of q8_0"), std::string::npos) << q8.err;
  const std::string want = g["text"].get<std::string>();
  const size_t sentence = want.find('.');
  ASSERT_NE(sentence, std::string::npos);
  EXPECT_EQ(q8.out.substr(0, sentence + 1), want.substr(0, sentence + 1)) << q8.out;
  const CliOutput alias = run_glmserve(args("--kv-type", "q8_0"));
  EXPECT_EQ(alias.out, q8.out);
  const CliOutput bad = run_glmserve(args("--kv", "q4_0"));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--kv: expected f16, f32 or q8_0, got 'q4_0'"), std::string::npos)
      << bad.err;
}

// scripts/serve.sh's demo model when no real tokenizer is at hand (a clone without ../shared):
// gen-model's own vocabulary, whose pieces are made-up words, so its random answers read as
// words, not letter noise or U+FFFD (issue 17). Sampled and greedy, a few seeds.
TEST(EngineRun, TheDemoModelWithoutARealVocabularyAnswersInWords) {
  const std::string model = "/tmp/glm_demo_" + std::to_string(getpid()) + ".gguf";
  CliOutput g = run_glmserve(
      {"gen-model", "--arch", "chatglm3", "--preset", "small", "--type", "q8_0", "-o", model});
  ASSERT_EQ(g.code, 0) << g.err;
  for (const char* temp : {"0", "0.8"}) {
    for (const char* seed : {"1", "2"}) {
      const CliOutput r =
          run_glmserve({"run", "--model", model, "--prompt", "你好，请介绍一下你自己", "-n", "40",
                        "--temp", temp, "--seed", seed, "-t", "2"});
      ASSERT_EQ(r.code, 0) << r.err;
      SCOPED_TRACE(r.out);
      EXPECT_EQ(r.out.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD in the answer";
      // Words of letters, at least five of three letters or more, and little else.
      const std::regex word("[a-z]{3,}");
      const auto n_words = std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), word),
                                         std::sregex_iterator());
      EXPECT_GE(n_words, 5);
      const auto letters = std::count_if(r.out.begin(), r.out.end(),
                                         [](char c) { return (c >= 'a' && c <= 'z') || c == ' '; });
      EXPECT_GE(letters * 10, static_cast<long>(r.out.size()) * 9);  // >= 90% letters and spaces
      // Pronounceable: vowels are >= 35% of the letters (random letters have ~20%: the old
      // vocabulary of letter pairs and triples answered "sgpguvekf dfgmxk", 20% and 32% greedy).
      const auto vowels = std::count_if(r.out.begin(), r.out.end(), [](char c) {
        return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u';
      });
      const auto n_letters =
          std::count_if(r.out.begin(), r.out.end(), [](char c) { return c >= 'a' && c <= 'z'; });
      EXPECT_GE(vowels * 100, n_letters * 35);
    }
  }
  unlink(model.c_str());
}

// Speculative decoding leaves the greedy text as llama.cpp's, and says what it accepted.
TEST(EngineRun, SpecNgramKeepsLlamaCppsGreedyTextAndCountsItsDrafts) {
  const std::string model = shared("models/stories260K.gguf");
  const std::string golden = shared("models/stories260K.greedy.json");
  if (!exists(model) || !exists(golden)) GTEST_SKIP() << model << " or its golden is absent";
  const auto g = nlohmann::json::parse(slurp(golden));
  CliOutput r = run_glmserve({"run", "--model", model, "--prompt", g["prompt"].get<std::string>(),
                              "-n", std::to_string(g["n_new"].get<int>()), "--temp", "0", "--raw",
                              "-t", "1", "--spec", "ngram"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, g["text"].get<std::string>() + "\n");
  r = run_glmserve({"run", "--model", model, "--raw", "--temp", "0", "-n", "100", "-t", "1",
                    "--spec", "ngram", "--prompt",
                    "Lily saw a big red ball in the park. She wanted to play. Lily saw a big red"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("speculative: [1-9][0-9]* of [1-9][0-9]* "
                                                  "drafted tokens accepted")))
      << r.err;
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--spec", "draft"}, {"--draft", "d.gguf"}, {"--spec", "fast"}}) {
    std::vector<std::string> args = {"run", "--model", model, "--prompt", "hi"};
    args.insert(args.end(), bad.begin(), bad.end());
    r = run_glmserve(args);
    EXPECT_NE(r.code, 0) << bad[0];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    const char* want = bad[1] == "fast"     ? "expected ngram, draft, mtp or off"
                       : bad[0] == "--spec" ? "needs a draft model: add --draft M.gguf"
                                            : "d.gguf";
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
}

// A draft model (--draft alone implies --spec draft; here stories260K drafting for itself)
// keeps llama.cpp's greedy text too, and the summary counts its drafts.
TEST(EngineRun, SpecDraftKeepsLlamaCppsGreedyTextAndCountsItsDrafts) {
  const std::string model = shared("models/stories260K.gguf");
  const std::string golden = shared("models/stories260K.greedy.json");
  if (!exists(model) || !exists(golden)) GTEST_SKIP() << model << " or its golden is absent";
  const auto g = nlohmann::json::parse(slurp(golden));
  CliOutput r = run_glmserve({"run", "--model", model, "--prompt", g["prompt"].get<std::string>(),
                              "-n", std::to_string(g["n_new"].get<int>()), "--temp", "0", "--raw",
                              "-t", "1", "--draft", model});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, g["text"].get<std::string>() + "\n");
  EXPECT_TRUE(std::regex_search(r.err, std::regex("speculative: [1-9][0-9]* of [1-9][0-9]* "
                                                  "drafted tokens accepted")))
      << r.err;
}

TEST(EngineRun, BadInvocationsFailWithOneLine) {
  CliOutput r = run_glmserve({"run", "--prompt", "hi"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
  r = run_glmserve({"run", "--model", "/nonexistent.gguf", "--prompt", "hi"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nonexistent.gguf"), std::string::npos) << r.err;
  r = run_glmserve({"run", "--model", "m.gguf", "--prompt", "hi", "--temp", "warm"});
  EXPECT_EQ(r.code, 2);
  r = run_glmserve({"chat", "--model", "m.gguf", "--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bogus"), std::string::npos) << r.err;
}

TEST(EngineRun, PipedChatReusesTheCacheOfEarlierTurns) {
  const std::string model = shared("reference/chatglm3-small.gguf");
  if (!exists(model)) GTEST_SKIP() << model << " is absent";
  const CliOutput r =
      run_glmserve({"chat", "--model", model, "--temp", "0", "-n", "6", "--verbose", "-t", "1"},
                   "hello\nhow are you\n/reset\nhello\n");
  ASSERT_EQ(r.code, 0) << r.err;
  // One summary per turn: "prompt P tokens (C cached), G tokens generated, ..., REASON".
  std::regex line(R"(\[prompt (\d+) tokens \((\d+) cached\), (\d+) tokens generated.*, (\w+)\])");
  std::vector<std::smatch> turns;
  for (std::sregex_iterator it(r.err.begin(), r.err.end(), line), end; it != end; ++it) {
    turns.push_back(*it);
  }
  ASSERT_EQ(turns.size(), 3u) << r.err;
  auto num = [](const std::smatch& m, int i) { return std::stoi(m[i].str()); };
  // Turn 2 continues turn 1's actual tokens: everything fed to the model is cached.
  const int fed1 = num(turns[0], 1) + num(turns[0], 3) - (turns[0][4] == "length" ? 1 : 0);
  EXPECT_EQ(num(turns[1], 2), fed1) << r.err;
  EXPECT_GT(num(turns[1], 1), fed1);
  // After /reset the same first message is a prompt seen whole before: every token cached, its
  // first token from the logits kept when it ran (docs/engine.md#prompt-logits).
  EXPECT_EQ(num(turns[2], 1), num(turns[0], 1));
  EXPECT_EQ(num(turns[2], 2), num(turns[2], 1));
  EXPECT_EQ(num(turns[2], 3), num(turns[0], 3));
}

// Ctrl-C during an answer stops that answer, not the session (llama-cli's behaviour): the turn
// ends "cancelled" with its partial text and the chat goes on to the next line.
TEST(EngineRun, CtrlCStopsTheAnswerNotTheChat) {
  const std::string model = shared("reference/chatglm3-small.gguf");
  if (!exists(model)) GTEST_SKIP() << model << " is absent";
  const std::string base = "/tmp/glm_engine_sigint_" + std::to_string(getpid());
  const std::string out_path = base + ".out", err_path = base + ".err";
  int in[2];
  ASSERT_EQ(pipe(in), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[1]);
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    const char* argv[] = {GLMSERVE_BIN, "chat",       "--model",   model.c_str(), "--temp",
                          "0",          "--ctx-size", "4096",      "-n",          "4000",
                          "-t",         "1",          "--verbose", nullptr};
    execv(GLMSERVE_BIN, const_cast<char**>(argv));
    _exit(127);
  }
  close(in[0]);
  ASSERT_EQ(write(in[1], "hello\n", 6), 6);
  // Wait for the answer to start streaming, then interrupt it.
  for (int i = 0; i < 600 && slurp(out_path).empty(); ++i) usleep(50 * 1000);
  ASSERT_FALSE(slurp(out_path).empty()) << slurp(err_path);
  kill(pid, SIGINT);
  for (int i = 0; i < 200 && slurp(err_path).find("tokens generated") == std::string::npos; ++i) {
    usleep(50 * 1000);
  }
  ASSERT_EQ(write(in[1], "/exit\n", 6), 6);
  close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string err = slurp(err_path);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_NE(err.find(", cancelled]"), std::string::npos) << err;
  unlink(out_path.c_str());
  unlink(err_path.c_str());
}

}  // namespace
