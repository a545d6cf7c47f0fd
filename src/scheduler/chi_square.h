// Chi-square goodness of fit for the speculative decoding tests (speculative_test.cc,
// draft_model_test.cc): observed counts against expected counts. Header-only, test use only.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace glm::testing {

// Upper tail of the chi-square distribution with k degrees of freedom (Wilson-Hilferty).
inline double chi_square_p(double x, int k) {
  const double h = 2.0 / (9.0 * k);
  const double z = (std::cbrt(x / k) - (1 - h)) / std::sqrt(h);
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// (observed, expected) cells -> p-value, cells with expected < 5 pooled.
inline double chi_square(const std::vector<double>& observed, const std::vector<double>& expected) {
  double x = 0, pooled_o = 0, pooled_e = 0;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] < 5) {
      pooled_o += observed[i];
      pooled_e += expected[i];
      continue;
    }
    x += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
    ++cells;
  }
  if (pooled_e > 0) {
    x += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
    ++cells;
  }
  return chi_square_p(x, cells - 1);
}

}  // namespace glm::testing
