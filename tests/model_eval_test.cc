// `glmserve eval` end to end (docs/cli.md): the binary's JSON lines against the reference data.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"

namespace {

using CliResult = glm::testing::CliRun;
using glm::testing::run_cli;

std::string data(const std::string& rel) { return std::string(GLM_SHARED_DATA) + "/" + rel; }

std::vector<nlohmann::json> lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

float max_diff(const std::vector<nlohmann::json>& got, const std::vector<nlohmann::json>& want) {
  float m = 0;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    EXPECT_EQ(got[i]["pos"], want[i]["pos"]);
    EXPECT_EQ(got[i]["token"], want[i]["token"]);
    auto a = got[i]["values"].get<std::vector<float>>();
    auto b = want[i]["values"].get<std::vector<float>>();
    EXPECT_EQ(a.size(), b.size());
    for (size_t j = 0; j < std::min(a.size(), b.size()); ++j)
      m = std::max(m, std::fabs(a[j] - b[j]));
  }
  return m;
}

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return lines(ss.str());
}

TEST(ModelEval, Glm3TinyHiddenMatchesOracle) {
  const std::string m = data("oracle/glm3-tiny.gguf");
  if (!std::ifstream(m).good()) GTEST_SKIP() << m << " is absent";
  CliResult r = run_cli("eval --model " + m + " --tokens 0,1,2 --decode 3,4 --output hidden");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_LT(max_diff(lines(r.out), read_lines(data("oracle/glm3-tiny.hidden.jsonl"))), 1e-5f);
  r = run_cli("eval --model " + m + " --tokens 0,1,2 --decode 3,4 --output hidden --kv f16");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_LT(max_diff(lines(r.out), read_lines(data("oracle/glm3-tiny.hidden.jsonl"))), 5e-4f);
}

TEST(ModelEval, Chatglm3SmallLogitsMatchLlamaCpp) {
  const std::string m = data("reference/chatglm3-small.gguf");
  if (!std::ifstream(m).good()) GTEST_SKIP() << m << " is absent";
  CliResult r =
      run_cli("eval --model " + m +
              " --tokens 17,1000,5,2047,3350,259,300,1234,3999,42,7,2500,811,96,3072,1777,4000,"
              "12,2048,655,3333,100,1,4088 --decode 3,1500,2222,4095 --output logits");
  ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 500);
  // 3e-3: see src/model/golden_test.cc for the derivation.
  EXPECT_LT(max_diff(lines(r.out), read_lines(data("reference/chatglm3-small.logits.jsonl"))),
            3e-3f);
}

// The same reference through `eval --device vulkan` (lavapipe in CI; docs/gpu.md), whole and
// split with the CPU (--gpu-layers 1: the last layer and the head on the GPU), with the CPU's
// bound; and `glmserve devices` lists the device it ran on, with its largest buffer.
TEST(ModelEval, OnTheGpuChatglm3SmallLogitsMatchLlamaCpp) {
  const std::string m = data("reference/chatglm3-small.gguf");
  if (!std::ifstream(m).good()) GTEST_SKIP() << m << " is absent";
  for (const char* layers : {"-1", "1"}) {
    SCOPED_TRACE(std::string("--gpu-layers ") + layers);
    // stdout alone: the device's log line goes to stderr.
    CliResult r = glm::testing::run_shell(
        std::string(GLMSERVE_BIN) + " eval --model " + m +
        " --tokens 17,1000,5,2047,3350,259,300,1234,3999,42,7,2500,811,96,3072,1777,4000,"
        "12,2048,655,3333,100,1,4088 --decode 3,1500,2222,4095 --output logits --device vulkan "
        "--gpu-layers " +
        layers + " 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 500);
    EXPECT_LT(max_diff(lines(r.out), read_lines(data("reference/chatglm3-small.logits.jsonl"))),
              3e-3f);
  }
  CliResult d = run_cli("devices");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_EQ(d.out.rfind("cpu ", 0), 0u) << d.out;
  EXPECT_NE(d.out.find("vulkan:0 "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("buffers up to "), std::string::npos) << d.out;
  // The largest buffer, as the plan takes it (at most GLMSERVE_VULKAN_MAX_BUFFER_MB).
  d = glm::testing::run_shell(std::string("GLMSERVE_VULKAN_MAX_BUFFER_MB=3 ") + GLMSERVE_BIN +
                              " devices --json 2>/dev/null");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_NE(d.out.find("\"max_buffer_bytes\":3145728"), std::string::npos) << d.out;
  d = run_cli("eval --model " + m + " --tokens 1 --device vulkan:99");
  EXPECT_EQ(d.exit_code, 1) << d.out;
  EXPECT_NE(d.out.find("vulkan:99 does not exist"), std::string::npos) << d.out;
  d = run_cli("eval --model " + m + " --tokens 1 --device cuda");
  EXPECT_EQ(d.exit_code, 2) << d.out;
}

// ChatGLM-6B (v1) through `eval --device vulkan` (its prompt prefilled in one step, its length
// carried into the decode steps): the CPU's logits; a split with --gpu-layers is refused by
// name.
TEST(ModelEval, OnTheGpuChatglm1LogitsEqualTheCpus) {
  char tmpl[] = "/tmp/glm-eval-v1-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string model = std::string(tmpl) + "/v1.gguf";
  CliResult g = run_cli("gen-model --arch chatglm1 --preset tiny --seed 3 -o " + model);
  ASSERT_EQ(g.exit_code, 0) << g.out;
  // A prompt ending in [gMASK] <sop> (681, 684 in the tiny vocabulary), two decode steps.
  const std::string args =
      " eval --model " + model + " --tokens 5,100,200,31,681,684 --decode 3,7 --output logits";
  CliResult cpu =
      glm::testing::run_shell(std::string(GLMSERVE_BIN) + args + " --device cpu 2>/dev/null");
  CliResult gpu =
      glm::testing::run_shell(std::string(GLMSERVE_BIN) + args + " --device vulkan 2>/dev/null");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out.substr(0, 500);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.out.substr(0, 500);
  const std::vector<nlohmann::json> want = lines(cpu.out);
  ASSERT_EQ(want.size(), 8u);
  float max_abs = 0;
  for (const nlohmann::json& row : want) {
    for (float v : row["values"].get<std::vector<float>>())
      max_abs = std::max(max_abs, std::fabs(v));
  }
  EXPECT_GT(max_abs, 0.1f);
  EXPECT_LT(max_diff(lines(gpu.out), want), 1e-4f * std::max(1.0f, max_abs));
  CliResult split = run_cli(args.substr(1) + " --device vulkan --gpu-layers 1");
  EXPECT_NE(split.exit_code, 0);
  EXPECT_NE(split.out.find("--gpu-layers 1: ChatGLM-6B (v1)"), std::string::npos) << split.out;
  std::system(("rm -rf " + std::string(tmpl)).c_str());
}

// No Vulkan loader on the machine: the binary still runs, on the CPU, and says why once.
TEST(ModelEval, WithoutAVulkanLoaderTheCpuServes) {
  const std::string m = data("oracle/glm3-tiny.gguf");
  if (!std::ifstream(m).good()) GTEST_SKIP() << m << " is absent";
  const std::string env = "GLMSERVE_VULKAN_LIBRARY=/nonexistent/libvulkan.so.1 ";
  CliResult r = glm::testing::run_shell(env + GLMSERVE_BIN + " eval --model " + m +
                                        " --tokens 0,1,2 --output hidden --device vulkan 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("running on the CPU"), std::string::npos) << r.out;
  CliResult d = glm::testing::run_shell(env + GLMSERVE_BIN + " devices 2>&1");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_NE(d.out.find("no Vulkan loader"), std::string::npos) << d.out;
}

TEST(ModelEval, BadInputFailsWithOneLine) {
  const std::string m = data("oracle/glm3-tiny.gguf");
  if (!std::ifstream(m).good()) GTEST_SKIP() << m << " is absent";
  CliResult r = run_cli("eval --model " + m + " --tokens 0,1,99");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("out of range"), std::string::npos) << r.out;
  r = run_cli("eval --model /nonexistent.gguf --tokens 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("nonexistent"), std::string::npos) << r.out;
  r = run_cli("eval --model " + m);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--tokens"), std::string::npos) << r.out;
  r = run_cli("eval --model " + m + " --tokens 1 --output probs");
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli("eval --model " + m + " --tokens 1 --kv q8");
  EXPECT_EQ(r.exit_code, 2);
}

// GLM-4.5 through `eval --device vulkan --cpu-moe N|all` (docs/gpu.md#memory): the routed
// experts of the first N layers in host memory give the CPU's logits; a bad value is refused.
TEST(ModelEval, OnTheGpuGlm4MoeWithExpertsInHostMemoryEqualsTheCpu) {
  const std::string m =
      ::testing::TempDir() + "eval-glm4moe-tiny-" + std::to_string(getpid()) + ".gguf";
  CliResult g = run_cli("gen-model --arch glm4moe --preset tiny --type f32 -o " + m);
  ASSERT_EQ(g.exit_code, 0) << g.out;
  const std::string args =
      " eval --model " + m + " --tokens 17,300,5,211,42,7,150,99 --decode 11,222 --output logits";
  CliResult cpu =
      glm::testing::run_shell(std::string(GLMSERVE_BIN) + args + " --device cpu 2>/dev/null");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out.substr(0, 500);
  for (const char* n : {"2", "all"}) {
    SCOPED_TRACE(std::string("--cpu-moe ") + n);
    CliResult r = glm::testing::run_shell(std::string(GLMSERVE_BIN) + args +
                                          " --device vulkan --cpu-moe " + n + " 2>&1 >/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("in host memory"), std::string::npos) << r.out;  // the log line
    CliResult gpu = glm::testing::run_shell(std::string(GLMSERVE_BIN) + args +
                                            " --device vulkan --cpu-moe " + n + " 2>/dev/null");
    ASSERT_EQ(gpu.exit_code, 0) << gpu.out.substr(0, 500);
    EXPECT_LT(max_diff(lines(gpu.out), lines(cpu.out)), 1e-4f);
  }
  CliResult bad = run_cli("eval --model " + m + " --tokens 1 --device vulkan --cpu-moe some");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--cpu-moe: expected a count of layers"), std::string::npos) << bad.out;
  std::remove(m.c_str());
}

}  // namespace
