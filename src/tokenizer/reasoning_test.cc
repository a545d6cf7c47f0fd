#include "tokenizer/reasoning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace glm::tok {
namespace {

ReasoningPiece split(const std::vector<std::string>& pieces, bool opened = false) {
  ReasoningSplitter s(opened);
  ReasoningPiece all;
  auto add = [&](const ReasoningPiece& p) {
    all.reasoning += p.reasoning;
    all.content += p.content;
  };
  for (const std::string& p : pieces) add(s.feed(p));
  add(s.feed("", /*end=*/true));
  return all;
}

TEST(ReasoningSplitter, ThinkingComesApartFromTheAnswer) {
  ReasoningPiece p = split({"<think>Let me see.</think>\n\nIt is 4."});
  EXPECT_EQ(p.reasoning, "Let me see.");
  EXPECT_EQ(p.content, "It is 4.");
  p = split({"\n<think>x</think>y"});
  EXPECT_EQ(p.reasoning, "x");
  EXPECT_EQ(p.content, "y");
}

TEST(ReasoningSplitter, AnAnswerWithoutThinkingIsAllContent) {
  ReasoningPiece p = split({"Hello <think>not at the start</think>"});
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Hello <think>not at the start</think>");
  p = split({"  <thin", "g>"});  // a prefix of the marker that turns out not to be it
  EXPECT_EQ(p.content, "  <thing>");
  p = split({"<thi"});  // the answer ended inside a possible marker
  EXPECT_EQ(p.content, "<thi");
}

TEST(ReasoningSplitter, APromptThatOpensTheThinkingStartsInside) {
  ReasoningPiece p = split({"step 1", "</think>", "done"}, /*opened=*/true);
  EXPECT_EQ(p.reasoning, "step 1");
  EXPECT_EQ(p.content, "done");
}

TEST(ReasoningSplitter, UnterminatedThinkingStaysReasoning) {
  ReasoningPiece p = split({"<think>still thinking </thi"});
  EXPECT_EQ(p.reasoning, "still thinking </thi");
  EXPECT_EQ(p.content, "");
}

// Every split of a text into two and three pieces (markers cut anywhere) gives the whole
// text's result, and reasoning comes out as soon as it is known not to be a marker.
TEST(ReasoningSplitter, AnySplitGivesTheSameResult) {
  for (const std::string text : {"<think>a<b</think>\n c</think>", " <think></think>x", "<think>",
                                 "plain</think>", "<think>r1 </thin k></think>answer <think>"}) {
    const ReasoningPiece whole = split({text});
    for (size_t i = 0; i <= text.size(); ++i) {
      for (size_t j = i; j <= text.size(); ++j) {
        const ReasoningPiece p = split({text.substr(0, i), text.substr(i, j - i), text.substr(j)});
        EXPECT_EQ(p.reasoning, whole.reasoning) << text << " at " << i << "," << j;
        EXPECT_EQ(p.content, whole.content) << text << " at " << i << "," << j;
      }
    }
  }
  ReasoningSplitter s;
  EXPECT_EQ(s.feed("<think>abc").reasoning, "abc");
  EXPECT_EQ(s.feed("de</").reasoning, "de");  // "</" may start the closing marker
  EXPECT_EQ(s.feed("b>").reasoning, "</b>");
}

TEST(ReasoningSplitter, FormatNames) {
  for (ReasoningFormat f :
       {ReasoningFormat::kAuto, ReasoningFormat::kNone, ReasoningFormat::kThink}) {
    EXPECT_EQ(parse_reasoning_format(reasoning_format_name(f)), f);
  }
  EXPECT_FALSE(parse_reasoning_format("deepseek").has_value());
}

}  // namespace
}  // namespace glm::tok
