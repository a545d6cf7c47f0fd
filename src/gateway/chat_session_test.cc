// ChatSession without HTTP: the turn applied to the stored history (new message, edit,
// regenerate), the engine request it builds, the payloads of engine events, and the stored
// answer for each outcome.
#include "gateway/chat_session.h"

#include <gtest/gtest.h>

namespace glm::gateway {
namespace {

class ChatSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::open(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(s).value();
    auto c = store_->create_conversation("", "be brief", "{}");
    ASSERT_TRUE(c.ok());
    conv_ = *c;
  }
  ChatSession session() { return ChatSession(store_.get(), *store_->get_conversation(conv_.id)); }
  // One complete turn answered with `answer`.
  void turn(const std::string& content, const std::string& answer) {
    ChatSession s = session();
    ChatTurn t;
    t.content = content;
    ASSERT_TRUE(s.begin(t, "r").ok());
    ASSERT_TRUE(s.open_answer().ok());
    RelayResult r;
    r.outcome = api::Outcome::kStop;
    r.text = answer;
    EXPECT_EQ(s.finish(r)["type"], "done");
  }
  std::vector<StoredMessage> messages() { return *store_->messages(conv_.id); }

  std::unique_ptr<Store> store_;
  Conversation conv_;
};

TEST_F(ChatSessionTest, NewTurnBuildsTheRequestFromTheStoredHistory) {
  turn("hello", "hi there");
  ChatSession s = session();
  ChatTurn t;
  t.content = "and now?";
  t.params.temperature = 0.1f;
  auto req = s.begin(t, "req-1");
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  EXPECT_EQ(req->id, "req-1");
  EXPECT_EQ(req->conversation, conv_.id);
  EXPECT_FLOAT_EQ(req->params.temperature, 0.1f);
  ASSERT_EQ(req->messages.size(), 4u);
  EXPECT_EQ(req->messages[0].role, "system");
  EXPECT_EQ(req->messages[0].content, "be brief");
  EXPECT_EQ(req->messages[2].content, "hi there");
  EXPECT_EQ(req->messages[3].content, "and now?");
  // The user's message is stored before generation; the answer row once the engine has it.
  EXPECT_EQ(messages().size(), 3u);
  ASSERT_TRUE(s.open_answer().ok());
  EXPECT_EQ(messages().back().status, "streaming");
  EXPECT_EQ(store_->get_conversation(conv_.id)->title, "hello");
}

TEST_F(ChatSessionTest, EditAddsAVersionOfTheEditedMessageAndShowsIt) {
  turn("one", "1");
  turn("two", "2");
  const int64_t second_user = messages()[2].id;
  ChatSession s = session();
  ChatTurn t;
  t.content = "TWO";
  t.edit_message_id = second_user;
  auto req = s.begin(t, "r");
  ASSERT_TRUE(req.ok());
  ASSERT_EQ(req->messages.size(), 4u);  // system, one, 1, TWO
  EXPECT_EQ(req->messages.back().content, "TWO");
  EXPECT_EQ(messages().size(), 3u);  // one, 1, TWO: the old "two" and its answer are a branch
  EXPECT_EQ(messages().back().siblings.size(), 2u);
  EXPECT_EQ(messages().back().siblings.front(), second_user);
  // Not a user message of this conversation: refused, nothing changed.
  ChatTurn bad;
  bad.content = "x";
  bad.edit_message_id = messages()[1].id;  // an assistant message
  EXPECT_EQ(session().begin(bad, "r").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(messages().size(), 3u);
}

TEST_F(ChatSessionTest, RegenerateAnswersTheLastUserMessageAgain) {
  ChatTurn t;
  t.regenerate = true;
  EXPECT_EQ(session().begin(t, "r").status().code(), ErrorCode::kInvalidArgument);
  turn("q", "a");
  const int64_t first_answer = messages().back().id;
  ChatSession s = session();
  auto req = s.begin(t, "r");
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->messages.back().content, "q");
  // The new answer is a second version beside the first, which stays.
  ASSERT_TRUE(s.open_answer().ok());
  ASSERT_EQ(messages().size(), 2u);
  EXPECT_EQ(messages().back().siblings, (std::vector<int64_t>{first_answer, s.answer_id()}));
  ASSERT_TRUE(store_->select_branch(conv_.id, first_answer).ok());
  EXPECT_EQ(messages().back().content, "a");
}

TEST_F(ChatSessionTest, EventsBecomePagePayloadsAndTheAnswerIsStoredByOutcome) {
  ChatSession s = session();
  ChatTurn t;
  t.content = "q";
  ASSERT_TRUE(s.begin(t, "r").ok());
  ASSERT_TRUE(s.open_answer().ok());
  protocol::Event tok;
  tok.type = protocol::EventType::kToken;
  tok.text = "pa";
  auto p = s.on_event(tok);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["type"], "token");
  protocol::Event stats;
  stats.type = protocol::EventType::kStats;
  EXPECT_TRUE(s.on_event(stats).empty());
  RelayResult r;
  r.outcome = api::Outcome::kError;
  r.error = Status(ErrorCode::kUnavailable, "engine gone");
  r.text = "partial";
  const nlohmann::json last = s.finish(r);
  EXPECT_EQ(last["type"], "error");
  EXPECT_EQ(last["content"], "partial");
  const StoredMessage answer = messages().back();
  EXPECT_EQ(answer.status, "error");
  EXPECT_EQ(answer.content, "partial");
  EXPECT_EQ(answer.error, "engine gone");
}

TEST_F(ChatSessionTest, ContinueGoesOnWithTheLastAnswerInItsOwnRow) {
  turn("q", "a complete answer");
  ChatTurn c;
  c.continue_answer = true;
  {
    ChatSession s = session();
    auto refused = s.begin(c, "r0");
    EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("complete"), std::string::npos);
  }
  // The gateway died mid-answer: the row was left interrupted with its partial text.
  const int64_t answer = messages().back().id;
  ASSERT_TRUE(store_->update_message(answer, "half an ans", "interrupted", "", "{}").ok());
  ChatSession s = session();
  auto req = s.begin(c, "r1");
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  EXPECT_EQ(s.prefix(), "half an ans");
  EXPECT_EQ(s.answer_id(), answer);
  // The engine gets the history up to the question; the partial answer goes as resume tokens.
  ASSERT_EQ(req->messages.size(), 2u);
  EXPECT_EQ(req->messages.back().content, "q");
  ASSERT_TRUE(s.open_answer().ok());
  EXPECT_EQ(messages().back().status, "streaming");
  EXPECT_EQ(s.start_payload()["prefix"], "half an ans");
  RelayResult r;
  r.outcome = api::Outcome::kStop;
  r.text = "wer.";
  EXPECT_EQ(s.finish(r)["status"], "complete");
  ASSERT_EQ(messages().size(), 2u);  // the same row grew; nothing was added
  EXPECT_EQ(messages().back().content, "half an answer.");
  EXPECT_EQ(messages().back().status, "complete");
  // Continue is a turn of its own: no content, edit or regenerate with it.
  c.content = "x";
  EXPECT_EQ(session().begin(c, "r2").status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(ChatSessionTest, AnAnswerCutOffByMaxTokensCanBeContinued) {
  ChatSession first = session();
  ChatTurn t;
  t.content = "q";
  ASSERT_TRUE(first.begin(t, "r").ok());
  ASSERT_TRUE(first.open_answer().ok());
  RelayResult r;
  r.outcome = api::Outcome::kLength;
  r.text = "the first ten";
  EXPECT_EQ(first.finish(r)["finish_reason"], "length");
  EXPECT_EQ(messages().back().status, "complete");
  ChatTurn c;
  c.continue_answer = true;
  ChatSession s = session();
  auto req = s.begin(c, "r1");
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  EXPECT_EQ(s.prefix(), "the first ten");
  ASSERT_TRUE(s.open_answer().ok());
  r.outcome = api::Outcome::kStop;
  r.text = " and the rest.";
  EXPECT_EQ(s.finish(r)["finish_reason"], "stop");
  ASSERT_EQ(messages().size(), 2u);
  EXPECT_EQ(messages().back().content, "the first ten and the rest.");
  // Now complete with stop: nothing left to continue.
  EXPECT_EQ(session().begin(c, "r2").status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(ChatSessionTest, AnAnswerTheGatewayCutAsItStoppedIsStoredInterrupted) {
  ChatSession s = session();
  ChatTurn t;
  t.content = "q";
  ASSERT_TRUE(s.begin(t, "r").ok());
  ASSERT_TRUE(s.open_answer().ok());
  RelayResult r;
  r.outcome = api::Outcome::kCancelled;
  r.text = "cut";
  EXPECT_EQ(s.finish(r, /*interrupted=*/true)["status"], "interrupted");
  EXPECT_EQ(messages().back().status, "interrupted");
  EXPECT_EQ(messages().back().content, "cut");
}

TEST(ChatTitle, PlainTextFromTheFirstLine) {
  EXPECT_EQ(title_from("# Heading\nbody"), "Heading");
  EXPECT_EQ(title_from("**bold** words"), "bold words");
  EXPECT_EQ(title_from(std::string(50, 'x')), std::string(40, 'x') + "…");
}

}  // namespace
}  // namespace glm::gateway
