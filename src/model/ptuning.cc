#include "model/ptuning.h"

namespace glm::model {

Status load_ptuning(const gguf::File& /*file*/, const Config& /*config*/, PrefixKv* /*out*/) {
  return unsupported("P-Tuning v2 adapters cannot be read yet (issue 31)");
}

}  // namespace glm::model
