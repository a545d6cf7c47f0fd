#include "convert/dir_kind.h"

#include "convert/peft_convert.h"
#include "convert/ptuning_convert.h"

namespace glm::convert {

DirKind dir_kind(const std::string& dir) {
  if (is_peft_dir(dir)) return DirKind::kLora;
  if (is_ptuning_dir(dir)) return DirKind::kPtuning;
  return DirKind::kModel;
}

}  // namespace glm::convert
