// The seed study's three prompts and its published figures (../shared/data/prompts/seed-study.json,
// whose "purpose" each name paraphrases): what `bench serve` and scripts/serve_load.py send, so
// that their figures compare with the study's. seed_prompts_test checks them against that file.
#pragma once

namespace glm::bench {

struct SeedPrompt {
  const char* name;
  const char* text;
};

inline constexpr SeedPrompt kSeedPrompts[] = {
    {"P1 short question", "请用三句话解释Transformer架构的核心思想。"},
    {"P2 marketing copy",
     "请为一家新能源汽车公司撰写一份面向Z世代用户的社交媒体推广文案，要求包含emoji、口语化表达，"
     "并控制在200字以内。"},
    {"P3 code review",
     "分析以下Python代码的潜在安全风险，并给出修复建议：```import os; user_input = input(); "
     "os.system(f'echo {user_input}')```"},
};

// The study's published time to first token (its "reported" figures): the same method on a GPU
// behind two Python front ends.
struct SeedReported {
  int gradio;
  int streamlit;
};
inline constexpr SeedReported kSeedReportedTtftMs{1247, 312};

}  // namespace glm::bench
