#include "bench/seed_prompts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "core/json.h"

namespace glm::bench {
namespace {

// The benchmark sends the study's own prompts, character for character, and its report
// quotes the study's figures as published.
TEST(SeedPrompts, AreTheStudysPrompts) {
  const std::string path = std::string(GLM_SHARED_DATA) + "/prompts/seed-study.json";
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is absent";
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json study = nlohmann::json::parse(text);
  const nlohmann::json& prompts = study.at("prompts");
  ASSERT_EQ(prompts.size(), std::size(kSeedPrompts));
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(prompts[i].at("text").get<std::string>(), kSeedPrompts[i].text) << i;
    EXPECT_EQ(std::string(kSeedPrompts[i].name).rfind(prompts[i].at("name").get<std::string>(), 0),
              0u)
        << kSeedPrompts[i].name;
  }
  const nlohmann::json& reported = study.at("reported");
  EXPECT_EQ(reported.at("Gradio TTFT ms").get<int>(), kSeedReportedTtftMs.gradio);
  EXPECT_EQ(reported.at("Streamlit TTFT ms").get<int>(), kSeedReportedTtftMs.streamlit);
}

}  // namespace
}  // namespace glm::bench
