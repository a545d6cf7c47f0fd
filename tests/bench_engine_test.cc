// `glmserve bench engine` end to end on a small real model: the report's fields and their
// consistency, and one-line errors on bad input. Speed itself is not asserted (benchmarks
// measure it; tests check the tool).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "convert/gen_model.h"
#include "gguf/gguf.h"
#include "model/test_util.h"

namespace {

using glm::testing::CliRun;
using glm::testing::run_cli;

std::string stories() { return std::string(GLM_SHARED_DATA) + "/models/stories260K.gguf"; }

bool have(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(BenchEngineTest, JsonReportIsCompleteAndConsistent) {
  if (!have(stories()))
    GTEST_SKIP() << "missing " << stories() << " (see ../shared/data/README.md)";
  const CliRun r =
      run_cli("bench engine --model " + stories() + " -p 8 -n 4 -r 3 -t 2 --json --bw-mb 8");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["reps"], 3);
  EXPECT_EQ(j["pp"]["n_tokens"], 8);
  EXPECT_EQ(j["tg"]["n_tokens"], 4);
  for (const char* test : {"pp", "tg"}) {
    const auto& t = j[test];
    ASSERT_EQ(t["samples"].size(), 3u) << test;
    for (double s : t["samples"]) EXPECT_GT(s, 0) << test;
    EXPECT_LE(t["tps_min"].get<double>(), t["tps_median"].get<double>()) << test;
    EXPECT_LE(t["tps_median"].get<double>(), t["tps_max"].get<double>()) << test;
  }
  // Weight bytes: more than zero, less than the file.
  struct stat st;
  ASSERT_EQ(stat(stories().c_str(), &st), 0);
  const double wbytes = j["weight_bytes_per_token"].get<double>();
  EXPECT_GT(wbytes, 0);
  EXPECT_LT(wbytes, static_cast<double>(st.st_size));
  // The bandwidth figures follow from the others.
  const double bw = j["bandwidth_gbs"]["median"].get<double>();
  EXPECT_GT(bw, 0);
  EXPECT_NEAR(j["tg_weight_gbs"].get<double>(), j["tg"]["tps_median"].get<double>() * wbytes / 1e9,
              1e-9 * wbytes);
  EXPECT_NEAR(j["tg_bandwidth_fraction"].get<double>(), j["tg_weight_gbs"].get<double>() / bw,
              1e-9);
  const std::string isa = j["isa"];
  EXPECT_TRUE(isa == "scalar" || isa == "avx2" || isa == "avx2+avxvnni" || isa == "avx512") << isa;
}

TEST(BenchEngineTest, TableHasBothTestsAndForcedIsaIsReported) {
  if (!have(stories()))
    GTEST_SKIP() << "missing " << stories() << " (see ../shared/data/README.md)";
  const CliRun r = run_cli("bench engine --model " + stories() + " -p 4 -n 2 -r 1 -t 1 --bw-mb 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("| pp4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg2 |"), std::string::npos) << r.out;
  const CliRun s =
      run_cli("bench engine --model " + stories() + " -p 0 -n 2 -r 1 -t 1 --bw-mb 0 --json");
  ASSERT_EQ(s.exit_code, 0) << s.out;
  EXPECT_FALSE(nlohmann::json::parse(s.out).contains("pp"));
  const CliRun forced =
      run_cli("bench engine --model " + stories() + " -p 0 -n 1 -r 1 -t 1 --bw-mb 0 --json");
  ASSERT_EQ(forced.exit_code, 0);
  setenv("GLMSERVE_ISA", "scalar", 1);
  const CliRun scalar =
      run_cli("bench engine --model " + stories() + " -p 0 -n 1 -r 1 -t 1 --bw-mb 0 --json");
  unsetenv("GLMSERVE_ISA");
  ASSERT_EQ(scalar.exit_code, 0) << scalar.out;
  EXPECT_EQ(nlohmann::json::parse(scalar.out)["isa"], "scalar");
}

TEST(BenchEngineTest, SpecNgramReportsTheVerifyCostPerDraftLength) {
  if (!have(stories()))
    GTEST_SKIP() << "missing " << stories() << " (see ../shared/data/README.md)";
  const CliRun r = run_cli("bench engine --model " + stories() +
                           " -p 0 -n 16 -r 1 -t 1 --bw-mb 0 --json --spec ngram");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("spec_verify")) << r.out;
  ASSERT_EQ(j["spec_verify"]["drafts"].size(), 4u) << r.out;
  for (const auto& d : j["spec_verify"]["drafts"]) {
    EXPECT_GT(d["cost"].get<double>(), 0) << r.out;
    EXPECT_GE(d["break_even_acceptance"].get<double>(), 0);
    EXPECT_LE(d["break_even_acceptance"].get<double>(), 1);
  }
  EXPECT_FALSE(nlohmann::json::parse(run_cli("bench engine --model " + stories() +
                                             " -p 0 -n 2 -r 1 -t 1 --bw-mb 0 --json")
                                         .out)
                   .contains("spec_verify"));
}

TEST(BenchEngineTest, DraftReportsTheDraftPassAndItsBreakEven) {
  if (!have(stories()))
    GTEST_SKIP() << "missing " << stories() << " (see ../shared/data/README.md)";
  const CliRun r = run_cli("bench engine --model " + stories() +
                           " -p 0 -n 16 -r 1 -t 1 --bw-mb 0 --json --draft " + stories());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("spec_verify")) << r.out;
  EXPECT_GT(j["spec_verify"]["draft_pass_ms"].get<double>(), 0) << r.out;
  for (const auto& d : j["spec_verify"]["drafts"]) {
    // The draft passes only add cost: break-even needs at least the n-gram acceptance.
    EXPECT_GE(d["break_even_acceptance_draft"].get<double>(),
              d["break_even_acceptance"].get<double>())
        << r.out;
  }
}

// --spec mtp on a glm4moe file with its MTP block: the block's pass is timed (drafter "mtp"),
// and the bytes a decode token reads count the chosen experts only (2 of 8) and not the MTP
// block: the report's figure is the file's tensors counted that way. A file without the block
// is refused in one line.
TEST(BenchEngineTest, SpecMtpTimesTheBlockAndCountsOnlyWhatADecodeTokenReads) {
  glm::convert::GenOptions o;
  o.family = glm::convert::Family::kGLM4MoE;
  o.type = glm::DType::kQ8_0;
  o.seed = 3;
  const std::string path = glm::model::testing::temp_path("bench-moe.gguf");
  ASSERT_TRUE(glm::convert::generate_model(o, path, nullptr).ok());
  const CliRun r =
      run_cli("bench engine --model " + path + " -p 0 -n 8 -r 1 -t 1 --bw-mb 0 --json --spec mtp");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("spec_verify")) << r.out;
  EXPECT_EQ(j["spec_verify"]["drafter"], "mtp");
  EXPECT_GT(j["spec_verify"]["draft_pass_ms"].get<double>(), 0);
  auto f = glm::gguf::File::open(path);
  ASSERT_TRUE(f.ok());
  double want = 0, all = 0;
  for (const glm::gguf::TensorInfo& t : (*f)->tensors()) {
    all += t.n_bytes;
    if (t.name == "token_embd.weight" || t.name.rfind("blk.3.", 0) == 0) continue;  // 3 layers
    want += t.shape.size() == 3 ? t.n_bytes * 2.0 / 8 : t.n_bytes;
  }
  EXPECT_NEAR(j["weight_bytes_per_token"].get<double>(), want, 64);
  EXPECT_LT(want, all / 2);
  o.mtp = false;
  const std::string trunk = glm::model::testing::temp_path("bench-moe-trunk.gguf");
  ASSERT_TRUE(glm::convert::generate_model(o, trunk, nullptr).ok());
  const CliRun refused = run_cli("bench engine --model " + trunk + " -n 4 -r 1 --spec mtp");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find("no multi-token-prediction block"), std::string::npos) << refused.out;
}

// -d D: pp and tg run after D positions already in the cache, with any KV type; the report
// says the depth (JSON fields, "tg2 @ d40" in the table) and the cache is sized for it.
TEST(BenchEngineTest, DepthRunsTheTestsAfterDPositionsAndSaysSo) {
  if (!have(stories()))
    GTEST_SKIP() << "missing " << stories() << " (see ../shared/data/README.md)";
  const std::string base = "bench engine --model " + stories() + " -p 4 -n 2 -r 1 -t 1 --bw-mb 0";
  const CliRun flat = run_cli(base + " --json --kv q8_0");
  ASSERT_EQ(flat.exit_code, 0) << flat.out;
  const CliRun deep = run_cli(base + " --json --kv q8_0 -d 40");
  ASSERT_EQ(deep.exit_code, 0) << deep.out;
  const auto f = nlohmann::json::parse(flat.out);
  const auto d = nlohmann::json::parse(deep.out);
  EXPECT_EQ(f["depth"], 0);
  EXPECT_EQ(d["depth"], 40);
  EXPECT_EQ(d["pp"]["depth"], 40);
  EXPECT_EQ(d["tg"]["depth"], 40);
  EXPECT_EQ(d["kv"], "q8_0");
  EXPECT_GT(d["depth_prefill_s"].get<double>(), 0);
  EXPECT_EQ(f["depth_prefill_s"].get<double>(), 0);
  // The cache holds the depth too: ceil((40 + 16) / 16) + 1 = 5 blocks against 1 + 1.
  EXPECT_NEAR(d["kv_mib"].get<double>(), 2.5 * f["kv_mib"].get<double>(), 1e-9);
  const CliRun table = run_cli(base + " --depth 40 --kv f32");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("| f32 | tg2 @ d40 |"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("| f32 | pp4 @ d40 |"), std::string::npos) << table.out;
  // Past the model's trained context (stories260K: 2048): timed anyway, with a note.
  const CliRun over = run_cli(base + " -p 0 -n 1 -d 2048");
  EXPECT_EQ(over.exit_code, 0) << over.out;
  EXPECT_NE(over.out.find("exceeds the model's trained context 2048"), std::string::npos)
      << over.out;
  EXPECT_NE(over.out.find("| tg1 @ d2048 |"), std::string::npos) << over.out;
}

TEST(BenchEngineTest, BadInputGivesOneLineError) {
  for (const std::string args :
       {"bench engine", "bench engine --model /nonexistent.gguf", "bench engine --model x -p -1",
        "bench engine --model x -r 0", "bench engine --model x --kv q4", "bench engine --bogus 1",
        "bench engine --model x --spec draft", "bench engine --model x -d -1",
        "bench engine --model x --draft /nonexistent.gguf"}) {
    const CliRun r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(r.out.find("glmserve: "), 0u) << args << ": " << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << ": " << r.out;
  }
  EXPECT_EQ(run_cli("bench engine --model x --kv q4").out,
            "glmserve: --kv: expected f16, f32 or q8_0, got 'q4'\n");
}

}  // namespace
