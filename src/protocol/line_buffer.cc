#include "protocol/line_buffer.h"

namespace glm::protocol {

void LineBuffer::append(std::string_view bytes) {
  if (start_ > 0 && start_ == buf_.size()) {
    buf_.clear();
    start_ = 0;
  } else if (start_ > 4096 && start_ * 2 > buf_.size()) {
    buf_.erase(0, start_);
    start_ = 0;
  }
  buf_.append(bytes);
}

LineBuffer::Next LineBuffer::next(std::string* line) {
  for (;;) {
    const size_t nl = buf_.find('\n', start_ + scanned_);
    if (discarding_) {
      if (nl == std::string::npos) {
        buf_.clear();
        start_ = scanned_ = 0;
        return Next::kNone;
      }
      start_ = nl + 1;
      scanned_ = 0;
      discarding_ = false;
      continue;
    }
    if (nl == std::string::npos) {
      scanned_ = buf_.size() - start_;
      if (scanned_ > max_line_bytes_ + 1) {  // +1: a trailing '\r' is allowed
        line->assign(buf_, start_, 256);
        discarding_ = true;
        buf_.clear();
        start_ = scanned_ = 0;
        return Next::kOverlong;
      }
      return Next::kNone;
    }
    const size_t len = nl - start_;
    scanned_ = 0;
    if (len > max_line_bytes_ + 1) {
      line->assign(buf_, start_, 256);
      start_ = nl + 1;
      return Next::kOverlong;
    }
    line->assign(buf_, start_, len);
    start_ = nl + 1;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (line->size() > max_line_bytes_) return Next::kOverlong;
    return Next::kLine;
  }
}

}  // namespace glm::protocol
