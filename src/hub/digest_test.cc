#include "hub/digest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace glm::hub {
namespace {

TEST(Digest, KnownVectors) {
  Digest empty(Digest::Kind::kSha256, 0);
  EXPECT_EQ(empty.finish_hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Digest abc(Digest::Kind::kSha256, 3);
  abc.update("a", 1);
  abc.update("bc", 2);
  EXPECT_EQ(abc.finish_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  abc.reset();
  abc.update("abc", 3);
  EXPECT_EQ(abc.finish_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // `git hash-object` of a file holding "hello\n".
  Digest blob(Digest::Kind::kGitBlobSha1, 6);
  blob.update("hello\n", 6);
  EXPECT_EQ(blob.finish_hex(), "ce013625030ba8dba906f756967f9e9ca394464a");
}

TEST(Digest, FilePrefix) {
  const std::string path = "/tmp/glm_digest_test_" + std::to_string(::getpid());
  std::ofstream(path) << "abcdef";
  Digest d(Digest::Kind::kSha256, 3);
  ASSERT_TRUE(digest_file_prefix(path, 3, &d).ok());
  EXPECT_EQ(d.finish_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Digest e(Digest::Kind::kSha256, 0);
  EXPECT_EQ(digest_file_prefix(path, 7, &e).code(), ErrorCode::kBadFile);
  ::unlink(path.c_str());
  EXPECT_EQ(digest_file_prefix(path, 1, &e).code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace glm::hub
