#include "hub/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gguf/gguf.h"

namespace glm::hub {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("glm_store_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A small valid GGUF at DIR/BASE/TAG.gguf.
  void add(const std::string& base, const std::string& tag, int64_t ctx) {
    fs::create_directories(dir_ / base);
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string("chatglm"));
    w.set("general.file_type", gguf::Value::u32(2));
    w.set("chatglm.context_length", gguf::Value::u32(static_cast<uint32_t>(ctx)));
    w.add_tensor("t", DType::kF32, {4, 2});
    ASSERT_TRUE(w.begin((dir_ / base / (tag + ".gguf")).string()).ok());
    const float data[8] = {0};
    ASSERT_TRUE(w.write_tensor_data(data, sizeof(data)).ok());
    ASSERT_TRUE(w.finish().ok());
  }
  fs::path dir_;
};

TEST_F(StoreTest, ListFindRemove) {
  Store store(dir_.string());
  auto empty = store.list();
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());  // a missing store is an empty one

  add("chatglm3-6b", "q4_0", 8192);
  add("chatglm3-6b", "f16", 8192);
  add("glm-4", "q8_0", 4096);
  std::ofstream(dir_ / "glm-4" / "junk.gguf") << "not a gguf";
  std::ofstream(dir_ / "glm-4" / "q8_0.json") << R"({"repo":"THUDM/glm-4-gguf","size":"x"})";
  fs::create_directories(dir_ / ".hidden");
  std::ofstream(dir_ / ".hidden" / "x.gguf") << "x";

  auto all = store.list();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].name.str(), "chatglm3-6b:f16");
  EXPECT_EQ((*all)[1].name.str(), "chatglm3-6b:q4_0");
  EXPECT_EQ((*all)[1].type, "Q4_0");
  EXPECT_EQ((*all)[1].architecture, "chatglm");
  EXPECT_EQ((*all)[1].context, 8192);
  EXPECT_EQ((*all)[2].name.str(), "glm-4:junk");
  EXPECT_FALSE((*all)[2].error.empty());
  EXPECT_EQ((*all)[3].context, 4096);
  EXPECT_EQ((*all)[3].repo, "");  // a manifest with wrong types is ignored, not fatal

  auto p = store.find(*parse_model_name("chatglm3-6b:q4_0"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (dir_ / "chatglm3-6b" / "q4_0.gguf").string());
  auto amb = store.find(*parse_model_name("chatglm3-6b"));
  ASSERT_FALSE(amb.ok());
  EXPECT_NE(amb.status().message().find("chatglm3-6b:f16 chatglm3-6b:q4_0"), std::string::npos);

  ASSERT_TRUE(store.remove(*parse_model_name("chatglm3-6b:f16")).ok());
  p = store.find(*parse_model_name("chatglm3-6b"));  // now the only tag
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(store.remove(*parse_model_name("chatglm3-6b")).ok());
  EXPECT_FALSE(fs::exists(dir_ / "chatglm3-6b"));
  EXPECT_EQ(store.remove(*parse_model_name("chatglm3-6b:q4_0")).code(), ErrorCode::kNotFound);
  // A partial download alone is removed by its name too.
  fs::create_directories(dir_ / "glm-4");
  std::ofstream(dir_ / "glm-4" / "q4_0.gguf.part") << "abc";
  std::ofstream(dir_ / "glm-4" / "q4_0.gguf.part.json") << "{}";
  ASSERT_TRUE(store.remove(*parse_model_name("glm-4:q4_0")).ok());
  EXPECT_FALSE(fs::exists(dir_ / "glm-4" / "q4_0.gguf.part"));
  EXPECT_FALSE(fs::exists(dir_ / "glm-4" / "q4_0.gguf.part.json"));
}

TEST_F(StoreTest, ResolveModelFlag) {
  add("chatglm3-6b", "q4_0", 8192);
  const std::string d = dir_.string();
  auto r = resolve_model("chatglm3-6b:q4_0", d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, d + "/chatglm3-6b/q4_0.gguf");
  r = resolve_model("chatglm3-6b", d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, d + "/chatglm3-6b/q4_0.gguf");
  r = resolve_model("chatglm3-6b:q8_0", d);  // a tagged name not in the store: said so
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no model 'chatglm3-6b:q8_0' in the store"),
            std::string::npos);
  // Paths and names that are no model come back unchanged, for the caller's file error.
  for (const char* v : {"missing.gguf", "/x/y.gguf", "nothing", "../a:b"}) {
    r = resolve_model(v, d);
    ASSERT_TRUE(r.ok()) << v;
    EXPECT_EQ(*r, v);
  }
  // An existing file wins over a name.
  const std::string cwd_file = d + "/chatglm3-6b/q4_0.gguf";
  r = resolve_model(cwd_file, d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, cwd_file);
}

TEST(StoreDir, FlagThenEnvironment) {
  EXPECT_EQ(*store_dir("/flag"), "/flag");
  ::setenv("GLMSERVE_MODELS", "/env-models", 1);
  EXPECT_EQ(*store_dir(""), "/env-models");
  ::unsetenv("GLMSERVE_MODELS");
  ::setenv("XDG_DATA_HOME", "/xdg", 1);
  EXPECT_EQ(*store_dir(""), "/xdg/glmserve/models");
  ::setenv("XDG_DATA_HOME", "relative", 1);  // the XDG spec says: ignore a relative path
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*store_dir(""), "/home/u/.local/share/glmserve/models");
}

}  // namespace
}  // namespace glm::hub
