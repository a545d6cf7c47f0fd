#include "api/responses.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace glm::api {
namespace {

using json = nlohmann::json;

TEST(Responses, InputAsTextOrItems) {
  auto text = parse_responses_request(R"({"input":"hi","instructions":"Be brief.",)"
                                      R"("max_output_tokens":9,"temperature":0,"store":false})");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  ASSERT_EQ(text->request.messages.size(), 1u);
  EXPECT_EQ(text->request.messages[0].role, "user");
  EXPECT_EQ(text->request.messages[0].content, "hi");
  EXPECT_EQ(text->instructions, "Be brief.");
  EXPECT_EQ(text->request.params.max_tokens, 9);
  EXPECT_FALSE(text->store);
  auto items = parse_responses_request(
      R"({"input":[{"role":"developer","content":"sys"},)"
      R"({"type":"message","role":"user","content":[{"type":"input_text","text":"a"},)"
      R"({"type":"input_text","text":"b"}]},{"role":"assistant","content":"c"}]})");
  ASSERT_TRUE(items.ok()) << items.status().to_string();
  ASSERT_EQ(items->request.messages.size(), 3u);
  EXPECT_EQ(items->request.messages[0].role, "system");
  EXPECT_EQ(items->request.messages[1].content, "ab");
  EXPECT_TRUE(items->store);
}

TEST(Responses, UnsupportedPartsAreRefusedByName) {
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({})", "input"},
           {R"({"input":[]})", "input"},
           {R"({"input":[{"type":"function_call_output","call_id":"x","output":"1"}]})",
            "input[0].type"},
           {R"({"input":[{"role":"tool","content":"x"}]})", "input[0].role"},
           {R"({"input":[{"role":"user","content":[{"type":"input_image"}]}]})",
            "input[0].content"},
           {R"({"input":"x","tools":[{"type":"function","name":"f"}]})", "tools"},
           {R"({"input":"x","background":true})", "background"},
           {R"({"input":"x","truncation":"auto"})", "truncation"},
           {R"({"input":"x","store":"yes"})", "store"},
           {R"({"input":"x","previous_response_id":5})", "previous_response_id"},
           {R"({"input":"x","max_output_tokens":0})", "max_tokens"},
           {R"({"input":"x","temperature":3})", "temperature"}}) {
    auto r = parse_responses_request(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  }
}

TEST(Responses, ObjectShapesAndTheStoredConversation) {
  protocol::SamplingParams p;
  p.max_tokens = 5;
  ResponseInfo info{"resp_1", "msg_1", 7, "m", "Be brief.", "resp_0", true, &p};
  protocol::Usage u{10, 4, 3};
  const Outcome length = Outcome::kLength;
  const json j = response_json(info, "abc", &length, u);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "abc");
  EXPECT_EQ(j["usage"]["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  EXPECT_EQ(j["previous_response_id"], "resp_0");
  const json pending = response_json(info, "", nullptr, {});
  EXPECT_EQ(pending["status"], "in_progress");
  EXPECT_TRUE(pending["output"].empty());
  EXPECT_TRUE(pending["usage"].is_null());
  int seq = 3;
  const std::string frame = response_event("response.output_text.delta", {{"delta", "x"}}, &seq);
  EXPECT_EQ(seq, 4);
  EXPECT_EQ(frame.rfind("event: response.output_text.delta\ndata: ", 0), 0u) << frame;
  EXPECT_NE(frame.find(R"("sequence_number":3)"), std::string::npos) << frame;

  const std::vector<protocol::Message> m = {{"user", "你好", ""}, {"assistant", "\"hi\"\n", ""}};
  auto back = messages_from_json(messages_to_json(m));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].content, "\"hi\"\n");
  EXPECT_FALSE(messages_from_json(R"([{"role":1}])").ok());
  EXPECT_FALSE(messages_from_json("{").ok());
}

}  // namespace
}  // namespace glm::api
