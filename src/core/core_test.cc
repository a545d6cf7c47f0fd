#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/json.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/utf8.h"

namespace glm {
namespace {

TEST(Fp16, ExhaustiveRoundTripOfEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0).
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // overflows to inf
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-26f), 0x0000);
}

TEST(Fp16, MatchesDoubleRoundingOnRandomFloats) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float f = dist(rng) * (i % 3 == 0 ? 1e-4f : 1.0f);
    const uint16_t h = fp32_to_fp16(f);
    const float back = fp16_to_fp32(h);
    if (std::isinf(back)) {
      EXPECT_GE(std::fabs(f), 65520.0f);
      continue;
    }
    // No other half is closer.
    const float up = fp16_to_fp32(static_cast<uint16_t>(h + 1));
    const float down = fp16_to_fp32(static_cast<uint16_t>(h - 1));
    EXPECT_LE(std::fabs(back - f), std::fabs(up - f) + 0.0f) << f;
    if ((h & 0x7fff) != 0) {
      EXPECT_LE(std::fabs(back - f), std::fabs(down - f)) << f;
    }
  }
}

TEST(Bf16, RoundTripAndRounding) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_bf16(f), b);
  }
  EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::nanf("")))));
}

TEST(DType, GeometryMatchesGgml) {
  EXPECT_EQ(row_bytes(DType::kQ4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(row_bytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(dtype_info(DType::kQ4_K).type_size, 144u);
  EXPECT_EQ(dtype_info(DType::kQ5_K).type_size, 176u);
  EXPECT_EQ(dtype_info(DType::kQ6_K).type_size, 210u);
  EXPECT_EQ(dtype_info(DType::kQ5_0).type_size, 22u);
  EXPECT_EQ(dtype_info(DType::kQ5_1).type_size, 24u);
  EXPECT_EQ(dtype_info(DType::kQ4_1).type_size, 20u);
  DType t;
  ASSERT_TRUE(dtype_from_name("Q4_K", &t));
  EXPECT_EQ(t, DType::kQ4_K);
  EXPECT_FALSE(dtype_from_name("q9_9", &t));
  EXPECT_EQ(dtype_info(12345u), nullptr);
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(utf8_valid("hello 你好 🙂"));
  EXPECT_FALSE(utf8_valid("\xc0\xaf"));          // overlong
  EXPECT_FALSE(utf8_valid("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(utf8_valid("\xe4\xbd"));          // truncated
  EXPECT_FALSE(utf8_valid("\xf4\x90\x80\x80"));  // > U+10FFFF
}

TEST(Utf8, CompletePrefixNeverSplitsACharacter) {
  const std::string s = "a你🙂b";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    const std::string part = s.substr(0, cut);
    const size_t n = utf8_complete_prefix(part);
    EXPECT_LE(n, cut);
    EXPECT_TRUE(utf8_valid(part.substr(0, n))) << cut;
    EXPECT_GE(n + 3, cut);  // at most an unfinished character is held back
  }
  EXPECT_EQ(utf8_complete_prefix("a\xe4\xbd"), 1u);
  EXPECT_EQ(utf8_sanitize("a\xffz"), "a\xef\xbf\xbdz");
}

TEST(Status, CodeTable) {
  const Status s(ErrorCode::kQueueFull, "engine busy");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "busy: engine busy");
  EXPECT_EQ(error_code_http_status(ErrorCode::kQueueFull), 429);
  EXPECT_EQ(error_code_from_name("context_overflow"), ErrorCode::kContextOverflow);
  StatusOr<int> v = 3;
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);
}

}  // namespace
}  // namespace glm

namespace glm {
namespace {

TEST(Json, ByteArraysHoldAnyBytes) {
  EXPECT_EQ(json_byte_array("").dump(), "[]");
  EXPECT_EQ(json_byte_array(std::string("a\xe4\xbd\0\xff", 5)).dump(), "[97,228,189,0,255]");
}

TEST(Json, LimitsApplyBeforeParsing) {
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":2}]})", 64), 3);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{{"})", 64), 1);  // brackets in strings
  EXPECT_EQ(json_nesting_depth(R"({"a":"\"[[["})", 64), 1);     // escaped quote
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = parse_json(deep, "the body");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the body: JSON nested deeper than 64 levels");
  JsonLimits small;
  small.max_bytes = 4;
  EXPECT_FALSE(parse_json("[1,2,3]", "x", small).ok());
  EXPECT_FALSE(parse_json("{", "x").ok());
  auto ok = parse_ordered_json(R"({"z":1,"a":2})", "x");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->begin().key(), "z");  // order kept
}

// What a ProgressLine writes into a memory stream.
std::string progress_output(bool tty, ProgressLine::Pipe pipe,
                            const std::vector<std::pair<uint64_t, uint64_t>>& updates) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    ProgressLine line("gen-model", tty, f, pipe);
    const ProgressFn fn = line.fn();
    for (const auto& [done, total] : updates) fn(done, total);
    line.finish();
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

TEST(Progress, ATerminalGetsOneRedrawnLineWithABarAPipeGetsQuartersOrNothing) {
  const std::vector<std::pair<uint64_t, uint64_t>> updates = {
      {0, 4000000}, {1000000, 4000000}, {2000000, 4000000}, {4000000, 4000000}};
  const std::string tty = progress_output(true, ProgressLine::Pipe::kQuiet, updates);
  // Redrawn in place: carriage returns and erase-line, never a newline; the last draw (done ==
  // total is always drawn) is full, and finish() clears it.
  EXPECT_EQ(tty.find('\n'), std::string::npos) << tty;
  EXPECT_NE(tty.find("\r\033[Kgen-model  [####################] 100%  4.0 MB / 4.0 MB"),
            std::string::npos)
      << tty;
  EXPECT_EQ(tty.substr(tty.size() - 4), "\r\033[K");
  const std::string quarters = progress_output(false, ProgressLine::Pipe::kQuarters, updates);
  EXPECT_NE(quarters.find("gen-model  [#####...............]  25%"), std::string::npos) << quarters;
  EXPECT_EQ(std::count(quarters.begin(), quarters.end(), '\n'), 3) << quarters;  // 25, 50, 100
  EXPECT_EQ(quarters.find('\r'), std::string::npos);
  EXPECT_EQ(progress_output(false, ProgressLine::Pipe::kQuiet, updates), "");
}

}  // namespace
}  // namespace glm
