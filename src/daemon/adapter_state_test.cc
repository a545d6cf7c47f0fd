// The run-time adapter list (adapter_state.h): written and read back, a missing file is an empty
// list, and a file that is not such a list is refused by name, whatever it holds.
#include "daemon/adapter_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace glm::daemon {
namespace {

class AdapterStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-adapter-state-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/e.adapters.json";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_, path_;
};

TEST_F(AdapterStateTest, WrittenListsReadBackAndAMissingFileIsEmpty) {
  auto none = read_adapter_state(path_);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  const std::vector<engine::AdapterSpec> list = {{"ad", "/models/a b:1.gguf", 0.5f},
                                                 {"pt.v2", "/x/p.gguf", 1.0f}};
  ASSERT_TRUE(save_adapter_state(path_, list).ok());
  auto back = read_adapter_state(path_);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ((*back)[i].name, list[i].name);
    EXPECT_EQ((*back)[i].path, list[i].path);
    EXPECT_EQ((*back)[i].scale, list[i].scale);
  }
  ASSERT_TRUE(save_adapter_state(path_, {}).ok());  // the last one unloaded
  back = read_adapter_state(path_);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
  EXPECT_NE(::access((path_ + ".tmp").c_str(), F_OK), 0);  // no temporary left behind
}

TEST_F(AdapterStateTest, AFileThatIsNotAListIsRefusedByName) {
  for (const std::string text :
       {"not json", "{\"name\":\"a\"}", "[1]", "[{\"name\":\"a\",\"path\":\"p\"}]",
        "[{\"name\":\"a\",\"path\":\"\",\"scale\":1}]",
        "[{\"name\":\"a/../b\",\"path\":\"p\",\"scale\":1}]",
        "[{\"name\":\"a\",\"path\":\"p\",\"scale\":\"1\"}]",
        "[{\"name\":\"a\",\"path\":[\"p\"],\"scale\":1}]"}) {
    std::ofstream(path_) << text;
    auto r = read_adapter_state(path_);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadFile) << text;
    EXPECT_NE(r.status().message().find(path_), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace glm::daemon
