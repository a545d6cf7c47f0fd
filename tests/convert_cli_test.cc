// glmserve gen-model / quantize / convert through the binary: exit codes, one-line errors,
// byte-identical output for a seed, and files the rest of glmserve reads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gguf/gguf.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string err;  // stderr
};

// Runs glmserve with `args` (shell words), capturing stderr.
Result run(const std::string& args) {
  const std::string err_path =
      (fs::temp_directory_path() / ("convert_cli_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = std::string(GLMSERVE_BIN) + " " + args + " >/dev/null 2>" + err_path;
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  fs::remove(err_path);
  return r;
}

std::string bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ConvertCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convert_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& n) const { return (dir_ / n).string(); }
  fs::path dir_;
};

TEST_F(ConvertCliTest, GenModelIsDeterministicAndLoads) {
  for (const char* arch : {"chatglm2", "chatglm3", "glm4", "llama"}) {
    SCOPED_TRACE(arch);
    const std::string a = file(std::string(arch) + "_a.gguf");
    const std::string b = file(std::string(arch) + "_b.gguf");
    const std::string flags =
        std::string("gen-model --arch ") + arch + " --preset tiny --type q8_0";
    Result r = run(flags + " --seed 3 -o " + a);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("random weights"), std::string::npos) << r.err;
    ASSERT_EQ(run(flags + " --seed 3 --output=" + b).code, 0);
    EXPECT_TRUE(bytes(a) == bytes(b)) << "same seed, different bytes";
    ASSERT_EQ(run(flags + " --seed 4 -o " + b).code, 0);
    EXPECT_FALSE(bytes(a) == bytes(b)) << "different seeds, same bytes";
    auto f = glm::gguf::File::open(a);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(*(*f)->get_string("general.architecture"),
              std::string(arch) == "llama" ? "llama" : "chatglm");
  }
}

TEST_F(ConvertCliTest, QuantizeReportsFallbacks) {
  const std::string in = file("f32.gguf");
  ASSERT_EQ(run("gen-model --arch chatglm3 --preset tiny --type f32 -o " + in).code, 0);
  Result r = run("quantize " + in + " " + file("k.gguf") + " q4_k");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("note: blk.0.ffn_down.weight"), std::string::npos) << r.err;
  auto f = glm::gguf::File::open(file("k.gguf"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->tensor("blk.0.ffn_down.weight")->type, glm::DType::kQ5_0);  // 160 % 256 != 0
  EXPECT_EQ((*f)->tensor("blk.0.ffn_norm.weight")->type, glm::DType::kF32);
}

TEST_F(ConvertCliTest, BadInputGivesOneLineErrors) {
  const std::string out = file("x.gguf");
  const std::vector<std::pair<std::string, int>> cases = {
      {"gen-model --preset tiny -o " + out, 2},                  // no --arch
      {"gen-model --arch chatglm9 --preset tiny -o " + out, 2},  // unknown arch
      {"gen-model --arch chatglm3 --preset tiny --type q9 -o " + out, 2},
      {"gen-model --arch chatglm3 --preset huge -o " + out, 2},
      {"gen-model --arch chatglm3 --seed x -o " + out, 2},
      {"gen-model --arch chatglm3 --bogus 1 -o " + out, 2},
      {"gen-model --arch chatglm3 --vocab /nonexistent/tokenizer.model -o " + out, 1},
      {"gen-model --arch chatglm3 --no-mtp -o " + out, 2},  // only glm4moe has an MTP block
      {"quantize " + file("none.gguf") + " " + out + " q4_0", 1},
      {"quantize a b", 2},
      {"quantize " + file("none.gguf") + " " + out + " q7", 2},
      {"convert " + file("nodir") + " -o " + out, 1},
      {"convert -o " + out, 2},
  };
  for (const auto& [args, code] : cases) {
    Result r = run(args);
    EXPECT_EQ(r.code, code) << args << "\n" << r.err;
    ASSERT_FALSE(r.err.empty()) << args;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": not one line: " << r.err;
    EXPECT_EQ(r.err.rfind("glmserve: ", 0), 0u) << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(ConvertCliTest, HelpForEachCommand) {
  for (const char* c : {"gen-model", "quantize", "convert"}) {
    EXPECT_EQ(run(std::string(c) + " --help").code, 0) << c;
  }
}

}  // namespace
