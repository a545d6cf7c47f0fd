// GLM_CHECK: aborts on a broken invariant (a bug). Never use it for bad input: return a Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#define GLM_CHECK(cond)                                                             \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
