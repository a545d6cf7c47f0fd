#include "hub/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace glm::hub {
namespace {

constexpr const char* kMark = ".at-";

bool stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

}  // namespace

std::string segment_path(const std::string& part, uint64_t start) {
  return part + kMark + std::to_string(start);
}

std::vector<Segment> find_segments(const std::string& part, uint64_t file_size) {
  const size_t slash = part.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : part.substr(0, slash);
  const std::string prefix = part.substr(slash == std::string::npos ? 0 : slash + 1) + kMark;
  std::vector<Segment> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    Segment s;
    s.start = std::strtoull(digits.c_str(), nullptr, 10);
    s.path = dir + "/" + name;
    out.push_back(s);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const Segment& a, const Segment& b) { return a.start < b.start; });
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].end = i + 1 < out.size() ? out[i + 1].start : file_size;
  }
  return out;
}

void fetch_segment(const HttpOptions& http_options, const std::string& url, const Segment& seg,
                   int max_attempts, int64_t backoff_ms, const std::atomic<bool>* stop,
                   std::atomic<uint64_t>* bytes) {
  if (seg.end <= seg.start) return;
  const int fd = ::open(seg.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  struct stat st {};
  uint64_t len = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  const uint64_t want = seg.end - seg.start;
  if (len > want) {  // not ours to trust: start this range over
    len = 0;
    if (::ftruncate(fd, 0) != 0) {
      ::close(fd);
      return;
    }
  }
  // Ends on `stop` (the main download failed) and on the user's cancel (Ctrl-C) alike.
  const std::atomic<bool>* cancel = http_options.cancel;
  auto halted = [&] { return stopped(stop) || stopped(cancel); };
  HttpClient http(http_options);
  int idle = 0;
  while (len < want && !halted()) {
    const uint64_t before = len;
    bool refused = false;
    bool failed_write = false;
    const uint64_t asked = seg.start + len;
    http.get(url, asked, [&](const HttpResponse& head, const char* data, size_t n) {
      if (head.status != 206 || head.range_start != static_cast<int64_t>(asked)) {
        refused = true;  // no ranges here: the main download fetches it in order
        return false;
      }
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, want - len));
      size_t done = 0;
      while (done < take) {
        const ssize_t w = ::pwrite(fd, data + done, take - done, static_cast<off_t>(len + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          failed_write = true;
          return false;
        }
        done += static_cast<size_t>(w);
      }
      len += take;
      bytes->fetch_add(take);
      return len < want && !halted();
    });
    if (refused || failed_write || len >= want) break;
    idle = len > before ? 0 : idle + 1;
    if (idle >= max_attempts) break;
    int64_t wait = backoff_ms;
    for (int i = 0; i < idle && wait < 30000; ++i) wait *= 2;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait);
    while (std::chrono::steady_clock::now() < until && !halted()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ::close(fd);
}

}  // namespace glm::hub
