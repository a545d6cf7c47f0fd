// check_coop_matmul (matmul.h): the tensor cores' products against the host's before the prefill
// takes them.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "core/log.h"
#include "gpu/matmul.h"

namespace glm::gpu {

StatusOr<bool> coop_matmul_agrees(Device* device, Shader shader) {
  constexpr int kRows = 200, kCols = 320, kTokens = 70;
  // Weights and activations from a fixed LCG, as fp16 (what the shader multiplies).
  uint32_t state = 12345;
  const auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f - 0.5f;  // [-0.5, 0.5)
  };
  std::vector<uint16_t> w(static_cast<size_t>(kRows) * kCols);
  for (uint16_t& v : w) v = fp32_to_fp16(next());
  std::vector<float> x(static_cast<size_t>(kTokens) * kCols), bias(kRows);
  for (float& v : x) v = fp16_to_fp32(fp32_to_fp16(4.0f * next()));
  for (float& v : bias) v = next();
  std::vector<double> want(static_cast<size_t>(kTokens) * kRows);
  for (int t = 0; t < kTokens; ++t) {
    for (int r = 0; r < kRows; ++r) {
      double sum = 0;
      for (int c = 0; c < kCols; ++c) {
        sum += static_cast<double>(fp16_to_fp32(w[static_cast<size_t>(r) * kCols + c])) *
               x[static_cast<size_t>(t) * kCols + c];
      }
      want[static_cast<size_t>(t) * kRows + r] = sum + bias[r] + 1.0;  // y's old 1.0 added
    }
  }
  StatusOr<Matrix> m = upload_matrix(device, DType::kF16, w.data(), kRows, kCols);
  if (!m.ok()) return m.status();
  m->shaders.coop = m->shaders.coop_ref = shader;
  StatusOr<Buffer> xb = upload_floats(device, x.data(), x.size());
  if (!xb.ok()) return xb.status();
  StatusOr<Buffer> bb = upload_floats(device, bias.data(), bias.size());
  if (!bb.ok()) return bb.status();
  const std::vector<float> ones(want.size(), 1.0f);
  for (int split : {0, 1}) {
    StatusOr<Buffer> yb = upload_floats(device, ones.data(), ones.size());
    if (!yb.ok()) return yb.status();
    MatmulTuning tuning;
    tuning.coop = 1;
    tuning.tiled_min_tokens = 2;
    tuning.tiled_split = split;
    GLM_CHECK((tiled_splits(*m, kTokens, tuning) > 1) == (split == 1));
    Stream& s = device->stream();
    s.begin();
    matmul(s, *m, xb->address(), yb->address(), kTokens, kRows, 0, {bb->address(), true}, tuning);
    GLM_RETURN_IF_ERROR(s.submit_and_wait());
    std::vector<float> got(want.size());
    GLM_RETURN_IF_ERROR(device->download(*yb, 0, got.size() * sizeof(float), got.data()));
    for (size_t i = 0; i < got.size(); ++i) {
      // f32 sums of 320 products of about 1: their rounding is far below this.
      if (!(std::fabs(got[i] - want[i]) <= 1e-4 * (1.0 + std::fabs(want[i])))) return false;
    }
  }
  return true;
}

Status check_coop_matmul(Device* device) {
  if (!device->info().coop_matrix || device->coop_verified()) return Status::Ok();
  // A driver that rejects the shader (the tensor cores' SPIR-V is compiled here, never run
  // here): said, and the prefill runs without them.
  if (Status s = device->try_pipeline(Shader::kMatmulCoopF16); !s.ok()) {
    GLM_LOG_WARN("%s; the prefill runs without tensor cores", s.message().c_str());
    return Status::Ok();
  }
  StatusOr<bool> ok = coop_matmul_agrees(device, Shader::kMatmulCoopF16);
  if (!ok.ok()) return ok.status();
  device->set_coop_verified(*ok);
  if (!*ok) {
    GLM_LOG_WARN(
        "vulkan: %s: the tensor-core matmul disagrees with the host's products; the "
        "prefill runs without tensor cores",
        device->info().name.c_str());
  }
  return Status::Ok();
}

}  // namespace glm::gpu
