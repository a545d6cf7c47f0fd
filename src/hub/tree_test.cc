#include "hub/tree.h"

#include <gtest/gtest.h>

#include "hub/repo.h"

namespace glm::hub {
namespace {

constexpr char kSha[] = "0b4f59e6d7c0fd2f6a0d1ae1a8f6f3b4c5d6e7f8091a2b3c4d5e6f708192a3b4";

TEST(Tree, ReadsFilesLfsAndSkipsDirectories) {
  const std::string text = std::string(R"([
    {"type":"file","oid":"CE013625030BA8DBA906F756967F9E9CA394464A","size":6,"path":"config.json"},
    {"type":"directory","oid":"x","size":0,"path":"sub"},
    {"type":"file","oid":"aaaa","size":123,"path":"sub/m.Q4_0.gguf",
     "lfs":{"oid":")") + kSha +
                           R"(","size":123,"pointerSize":134}},
    {"type":"file","size":7,"path":"b.gguf","lfs":{"sha256":")" +
                           kSha + R"(","size":7}}])";
  auto files = parse_tree(text, "t");
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].path, "config.json");
  EXPECT_EQ((*files)[0].git_oid, "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ((*files)[0].sha256, "");
  EXPECT_EQ((*files)[1].path, "sub/m.Q4_0.gguf");
  EXPECT_EQ((*files)[1].size, 123u);
  EXPECT_EQ((*files)[1].sha256, kSha);
  EXPECT_EQ((*files)[1].git_oid, "");  // an LFS pointer's blob id is not the file's
  EXPECT_EQ((*files)[2].sha256, kSha);
}

// Hostile answers: each is one clear error, never a crash, never a path outside the store.
TEST(Tree, RefusesHostileAnswers) {
  const std::string lfs = std::string(R"("lfs":{"oid":")") + kSha + R"(","size":5})";
  const struct {
    std::string text, expect;
  } cases[] = {
      {R"({"error":"Repository not found"})", "not a JSON list"},
      {"[1,2]", "is not an object"},
      {R"([{"type":"file","path":"../../x.gguf","size":5,)" + lfs + "}]", "unsafe file name"},
      {R"([{"type":"file","path":"/etc/passwd","size":5}])", "absolute file name"},
      {R"([{"type":"file","path":"a/./b","size":5}])", "unsafe file name"},
      {R"([{"type":"file","path":"a//b","size":5}])", "unsafe file name"},
      {R"([{"type":"file","path":"a\\..\\b","size":5}])", "backslash"},
      {R"([{"type":"file","path":"a\nb","size":5}])", "control character"},
      {R"([{"type":"file","path":"","size":5}])", "empty file name"},
      {R"([{"type":"file","path":["x"],"size":5}])", "'path' is not a string"},
      {R"([{"type":"file","path":"x","size":"5"}])", "not a non-negative integer"},
      {R"([{"type":"file","path":"x","size":-5}])", "not a non-negative integer"},
      {R"([{"type":"file","path":"x","size":5.5}])", "not a non-negative integer"},
      {R"([{"type":"file","path":"x","size":18446744073709551615}])", "too large"},
      {R"([{"type":"file","path":"x"}])", "no 'size'"},
      {R"([{"type":"file","path":"x","size":5,"lfs":"yes"}])", "'lfs' is not an object"},
      {R"([{"type":"file","path":"x","size":5,"lfs":{"oid":"abc","size":5}}])", "no sha256"},
      {R"([{"type":"file","path":"x","size":6,)" + lfs + "}]", "disagree"},
      {R"([{"type":"link","path":"x","size":5}])", "unknown type"},
      {R"([{"type":7,"path":"x","size":5}])", "'type' is not a string"},
      {"[" + std::string(100, '[') + std::string(100, ']') + "]", "nested deeper"},
      {"[{\"type\":\"file\"", "not valid JSON"},
  };
  for (const auto& c : cases) {
    auto files = parse_tree(c.text, "the tree");
    ASSERT_FALSE(files.ok()) << c.text;
    EXPECT_EQ(files.status().code(), ErrorCode::kBadFile) << c.text;
    EXPECT_NE(files.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << files.status().message();
  }
}

TEST(Tree, RefusesHugeAnswers) {
  std::string big = "[";
  const std::string entry = R"({"type":"directory","oid":"x","size":0,"path":"d"},)";
  while (big.size() <= kMaxTreeBytes) big += entry;
  big.back() = ']';
  auto files = parse_tree(big, "the tree");
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.status().message().find("MiB"), std::string::npos);
}

TEST(Repo, ChecksIdsAndBuildsUrls) {
  auto r = make_repo_ref("THUDM/chatglm3-6b", "", "", nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(tree_url(*r),
            "https://huggingface.co/api/models/THUDM/chatglm3-6b/tree/main"
            "?recursive=true");
  r = make_repo_ref("o/r", "refs/pr/1", "", "http://mirror:8080/hf/");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->endpoint, "http://mirror:8080/hf");
  EXPECT_EQ(resolve_url(*r, "sub dir/m+1.gguf"),
            "http://mirror:8080/hf/o/r/resolve/refs%2Fpr%2F1/sub%20dir/m%2B1.gguf");
  r = make_repo_ref("o/r", "", "https://flag", "http://env");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->endpoint, "https://flag");
  for (const char* bad : {"", "/", "o/", "/r", "o/r/x", "../r", "o/..", "o/.r", "o r/x", "o/r?x"}) {
    EXPECT_FALSE(make_repo_ref(bad, "", "", nullptr).ok()) << bad;
  }
  EXPECT_FALSE(make_repo_ref("o/r", "../main", "", nullptr).ok());
  EXPECT_FALSE(make_repo_ref("o/r", "a b", "", nullptr).ok());
  EXPECT_FALSE(make_repo_ref("o/r", "", "ftp://x", nullptr).ok());
  EXPECT_FALSE(make_repo_ref("o/r", "", "file:///etc", nullptr).ok());
}

}  // namespace
}  // namespace glm::hub
