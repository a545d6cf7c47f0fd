#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace glm::grammar {
namespace {

TEST(GrammarGbnf, Smoke) {
  auto g = parse_gbnf("root ::= \"a\" [0-9]+\n");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  Matcher m(*g, nullptr);
  EXPECT_TRUE(m.accept_bytes("a12").ok());
  EXPECT_TRUE(m.is_complete());
}

}  // namespace
}  // namespace glm::grammar
