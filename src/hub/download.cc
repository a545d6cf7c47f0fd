#include "hub/download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "core/json.h"
#include "hub/digest.h"
#include "hub/segment.h"

namespace glm::hub {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string mb(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(n) / 1e6);
  return buf;
}

// What a .part holds, so that a .part of another file or version is never resumed.
std::string part_meta(const std::string& url, const RemoteFile& f) {
  nlohmann::json j = {{"url", url}, {"size", f.size}, {"sha256", f.sha256}, {"git_oid", f.git_oid}};
  return dump_json(j) + "\n";
}

bool part_meta_matches(const std::string& path, const RemoteFile& f) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  StatusOr<nlohmann::json> j = parse_json(ss.str(), "a .part.json file");
  if (!j.ok() || !j->is_object()) return false;
  const nlohmann::json& m = *j;
  return m.value("size", uint64_t{0}) == f.size && m.value("sha256", std::string()) == f.sha256 &&
         m.value("git_oid", std::string()) == f.git_oid;
}

Status write_whole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return Status(ErrorCode::kInternal, "cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status(ErrorCode::kInternal, "cannot rename '" + tmp + "': " + errno_text());
  }
  return Status::Ok();
}

void fsync_parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_at(int fd, const char* data, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

// Sleeps `ms` in short slices; false when cancelled meanwhile.
bool wait_ms(int64_t ms, const std::atomic<bool>* cancel) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (cancel != nullptr && cancel->load()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cancel == nullptr || !cancel->load();
}

// One download in progress: the .part, its digest so far, and the counters.
class Job {
 public:
  Job(HttpClient* http, const std::string& url, const RemoteFile& file, const std::string& dest,
      const DownloadOptions& opts)
      : http_(http),
        url_(url),
        file_(file),
        dest_(dest),
        part_(dest + ".part"),
        meta_(part_ + ".json"),
        opts_(opts) {}

  StatusOr<DownloadResult> run();

 private:
  Status open_part();
  Status restart_from_zero();
  // Fetches in order until the .part holds `limit` bytes.
  Status fetch_until_complete(uint64_t limit);
  // The parallel part (download.h): sidecars, then merged in order; the rest is left to
  // fetch_until_complete(size).
  Status fetch_parallel();
  Status merge_segment(const Segment& seg);
  void remove_segments() const {
    for (const Segment& s : find_segments(part_, file_.size)) ::unlink(s.path.c_str());
  }
  void report() const {
    if (opts_.progress) opts_.progress(std::min(len_ + side_bytes_.load(), file_.size), file_.size);
  }
  // One request; `fatal` gets an error that retrying cannot fix.
  Status attempt(std::string* transient);
  Status verify_and_place(bool* retry_whole);
  void note(const std::string& s) const {
    if (opts_.note) opts_.note(s);
  }
  void discard() {
    ::unlink(part_.c_str());
    ::unlink(meta_.c_str());
    remove_segments();
  }
  std::string kept() const {
    return "kept " + mb(len_) + " of " + mb(file_.size) + " in " + part_ +
           "; run the same command again to resume";
  }

  HttpClient* http_;
  const std::string url_;
  const RemoteFile& file_;
  const std::string dest_, part_, meta_;
  const DownloadOptions& opts_;
  Fd fd_;
  uint64_t len_ = 0;                     // bytes in the .part, all of them in digest_
  uint64_t limit_ = 0;                   // fetch_until_complete's: the .part stops growing there
  bool no_ranges_ = false;               // the server answered a Range request with the whole file
  std::atomic<uint64_t> side_bytes_{0};  // in sidecars, not yet merged (progress)
  std::atomic<bool> stop_segments_{false};
  std::unique_ptr<Digest> digest_;
  DownloadResult result_;
};

Status Job::open_part() {
  fd_.fd = ::open(part_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_.fd < 0) {
    return Status(ErrorCode::kInternal, "cannot open '" + part_ + "': " + errno_text());
  }
  if (::flock(fd_.fd, LOCK_EX | LOCK_NB) != 0) {
    return Status(ErrorCode::kUnavailable,
                  "another glmserve pull is writing '" + part_ + "' (wait for it, or stop it)");
  }
  struct stat st {};
  if (::fstat(fd_.fd, &st) != 0) {
    return Status(ErrorCode::kInternal, "cannot stat '" + part_ + "': " + errno_text());
  }
  len_ = static_cast<uint64_t>(st.st_size);
  if (!file_.sha256.empty()) {
    digest_ = std::make_unique<Digest>(Digest::Kind::kSha256, file_.size);
  } else if (!file_.git_oid.empty()) {
    digest_ = std::make_unique<Digest>(Digest::Kind::kGitBlobSha1, file_.size);
  } else {
    note(file_.path + ": the hub lists no digest for it; only its size is checked");
  }
  if (len_ > 0 && (len_ > file_.size || !part_meta_matches(meta_, file_))) {
    note("an older partial download of " + file_.path + " is for other bytes: starting over");
    return restart_from_zero();
  }
  if (len_ == 0) return restart_from_zero();
  if (digest_) {
    if (Status s = digest_file_prefix(part_, len_, digest_.get()); !s.ok()) return s;
  }
  result_.resumed_from = len_;
  note("resuming " + file_.path + " at " + mb(len_) + " of " + mb(file_.size));
  return Status::Ok();
}

Status Job::restart_from_zero() {
  remove_segments();
  side_bytes_ = 0;
  if (::ftruncate(fd_.fd, 0) != 0) {
    return Status(ErrorCode::kInternal, "cannot truncate '" + part_ + "': " + errno_text());
  }
  len_ = 0;
  if (digest_) digest_->reset();
  return write_whole(meta_, part_meta(url_, file_));
}

Status Job::attempt(std::string* transient) {
  bool started = false;
  Status fatal;
  const HttpResponse r =
      http_->get(url_, len_, [&](const HttpResponse& head, const char* data, size_t n) {
        if (!started) {
          started = true;
          if (head.status == 206 && head.range_start != static_cast<int64_t>(len_)) {
            *transient = "the server answered a range from byte " +
                         std::to_string(head.range_start) + ", asked " + std::to_string(len_);
            return false;
          }
          if (head.status == 200 && len_ > 0) {
            no_ranges_ = true;
            note("the server ignored the Range request: starting " + file_.path + " over");
            if (Status s = restart_from_zero(); !s.ok()) {
              fatal = s;
              return false;
            }
          } else if (head.status != 200 && head.status != 206) {
            *transient = "unexpected HTTP status " + std::to_string(head.status);
            return false;
          }
        }
        if (len_ + n > file_.size) {
          fatal = bad_file(file_.path + ": the server sent more than the " +
                           std::to_string(file_.size) + " bytes the hub lists; discarded");
          discard();
          return false;
        }
        // Up to limit_: the bytes past it are a sidecar's (the transfer stops there).
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n, limit_ - len_));
        if (!write_at(fd_.fd, data, take, len_)) {
          fatal = Status(ErrorCode::kInternal,
                         "cannot write '" + part_ + "': " + errno_text() + " (" + kept() + ")");
          return false;
        }
        if (digest_) digest_->update(data, take);
        len_ += take;
        result_.bytes_fetched += take;
        report();
        return len_ < limit_;
      });
  ++result_.attempts;
  if (!fatal.ok()) return fatal;
  if (opts_.cancel != nullptr && opts_.cancel->load()) {
    return Status(ErrorCode::kCancelled, "interrupted: " + kept());
  }
  if (r.status == 404) {
    return not_found(file_.path + " is not at " + url_ + " (HTTP 404)");
  }
  if (r.status == 401 || r.status == 403) {
    return Status(ErrorCode::kUnauthorized,
                  url_ + " answered HTTP " + std::to_string(r.status) +
                      ": the repository is private or gated (set HF_TOKEN to a token with access)");
  }
  if (r.status >= 400 && r.status < 500 && r.status != 408 && r.status != 416 && r.status != 429) {
    std::string msg = r.error_body.substr(0, 200);
    for (char& c : msg) c = (c == '\n' || c == '\r') ? ' ' : c;
    return Status(ErrorCode::kUnavailable, url_ + " answered HTTP " + std::to_string(r.status) +
                                               (msg.empty() ? "" : ": " + msg) + " (" + kept() +
                                               ")");
  }
  if (r.status == 416) {
    note("the server has no bytes past " + mb(len_) + ": starting " + file_.path + " over");
    return restart_from_zero();
  }
  if (!r.transport_error.empty()) {
    if (transient->empty()) *transient = r.transport_error;
  } else if (r.status >= 300 && transient->empty()) {
    *transient = "HTTP " + std::to_string(r.status);
  } else if (len_ < file_.size && transient->empty()) {
    *transient = "the connection closed at " + mb(len_);
  }
  return Status::Ok();
}

Status Job::fetch_until_complete(uint64_t limit) {
  limit_ = limit;
  int idle = 0;  // consecutive attempts without a new byte
  while (len_ < limit_) {
    const uint64_t before = len_;
    std::string transient;
    if (Status s = attempt(&transient); !s.ok()) return s;
    if (len_ >= limit_) break;
    idle = len_ > before ? 0 : idle + 1;
    if (idle >= opts_.max_attempts) {
      return Status(ErrorCode::kUnavailable, file_.path + ": no progress after " +
                                                 std::to_string(idle) + " attempts (" + transient +
                                                 "); " + kept());
    }
    int64_t wait = opts_.backoff_ms;
    for (int i = 0; i < idle && wait < opts_.max_backoff_ms; ++i) wait *= 2;
    wait = std::min(wait, opts_.max_backoff_ms);
    note(transient + "; retrying in " + std::to_string(wait) + " ms (" + mb(len_) + " of " +
         mb(file_.size) + ")");
    if (!wait_ms(wait, opts_.cancel))
      return Status(ErrorCode::kCancelled, "interrupted: " + kept());
  }
  return Status::Ok();
}

Status Job::verify_and_place(bool* retry_whole) {
  *retry_whole = false;
  if (digest_) {
    const std::string got = digest_->finish_hex();
    const std::string& want =
        digest_->kind() == Digest::Kind::kSha256 ? file_.sha256 : file_.git_oid;
    const char* algo = digest_->kind() == Digest::Kind::kSha256 ? "sha256" : "git blob sha1";
    if (got != want) {
      if (result_.resumed_from > 0) {
        // The bad bytes may be the earlier .part's (a crash, a disk fault): fetch it all once.
        note(file_.path + ": " + algo + " mismatch after a resume; fetching the whole file again");
        result_.resumed_from = 0;
        *retry_whole = true;
        return restart_from_zero();
      }
      discard();
      return bad_file(file_.path + ": " + algo + " mismatch (the hub lists " + want +
                      ", the downloaded bytes are " + got +
                      "); the download was discarded and nothing was stored");
    }
  }
  if (::fsync(fd_.fd) != 0) {
    return Status(ErrorCode::kInternal, "cannot sync '" + part_ + "': " + errno_text());
  }
  if (opts_.before_place) {
    if (Status s = opts_.before_place(part_); !s.ok()) {
      discard();
      return s;
    }
  }
  remove_segments();  // none left after a merge; a restart's strays
  if (std::rename(part_.c_str(), dest_.c_str()) != 0) {
    return Status(ErrorCode::kInternal,
                  "cannot move '" + part_ + "' to '" + dest_ + "': " + errno_text());
  }
  ::unlink(meta_.c_str());
  fsync_parent(dest_);
  return Status::Ok();
}

Status Job::fetch_parallel() {
  // Sidecars of a range the .part has reached are of no use; the others resume.
  std::vector<Segment> segs;
  for (const Segment& s : find_segments(part_, file_.size)) {
    if (s.start > len_ && s.start < file_.size) {
      segs.push_back(s);
    } else {
      ::unlink(s.path.c_str());
    }
  }
  if (segs.empty()) {
    const uint64_t rest = file_.size - len_;
    const uint64_t n = std::min<uint64_t>(std::max(opts_.connections, 1),
                                          rest / std::max<uint64_t>(opts_.min_segment_bytes, 1));
    for (uint64_t k = 1; k < n; ++k) {
      const uint64_t start = len_ + rest * k / n;
      segs.push_back({start, 0, segment_path(part_, start)});
    }
  }
  if (segs.empty()) return Status::Ok();
  uint64_t kept_bytes = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    segs[i].end = i + 1 < segs.size() ? segs[i + 1].start : file_.size;
    struct stat st {};
    if (::stat(segs[i].path.c_str(), &st) == 0) {
      kept_bytes +=
          std::min<uint64_t>(static_cast<uint64_t>(st.st_size), segs[i].end - segs[i].start);
    }
  }
  side_bytes_ = kept_bytes;
  result_.resumed_from += kept_bytes;
  note("fetching " + file_.path + " over " + std::to_string(segs.size() + 1) + " connections");
  stop_segments_ = false;
  std::atomic<int> running{static_cast<int>(segs.size())};
  std::vector<std::thread> threads;
  for (const Segment& seg : segs) {
    threads.emplace_back([this, seg, &running] {
      fetch_segment(http_->options(), url_, seg, opts_.max_attempts, opts_.backoff_ms,
                    &stop_segments_, &side_bytes_);
      running.fetch_sub(1);
    });
  }
  Status st = fetch_until_complete(segs[0].start);
  if (!st.ok()) stop_segments_ = true;
  while (running.load() > 0) {  // the sidecars still coming: their progress shows
    report();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& t : threads) t.join();
  result_.bytes_fetched += side_bytes_.load() - std::min(side_bytes_.load(), kept_bytes);
  if (!st.ok()) return st;  // the sidecars stay for a resume
  for (const Segment& seg : segs) {
    if (no_ranges_) return Status::Ok();  // restarted from zero: all in order from here
    // A range a sidecar did not finish: in order, up to the next one.
    if (Status s = fetch_until_complete(seg.start); !s.ok()) return s;
    if (Status s = merge_segment(seg); !s.ok()) return s;
  }
  return Status::Ok();
}

Status Job::merge_segment(const Segment& seg) {
  Fd in;
  in.fd = ::open(seg.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in.fd < 0 || len_ != seg.start) return Status::Ok();  // nothing to take: fetched in order
  struct stat st {};
  const uint64_t n =
      ::fstat(in.fd, &st) == 0
          ? std::min<uint64_t>(static_cast<uint64_t>(st.st_size), seg.end - seg.start)
          : 0;
  std::vector<char> buf(1 << 20);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(in.fd, buf.data(), std::min<uint64_t>(buf.size(), n - done),
                              static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // shorter than it said: the rest is fetched in order
    const size_t got = static_cast<size_t>(r);
    if (!write_at(fd_.fd, buf.data(), got, len_)) {
      return Status(ErrorCode::kInternal,
                    "cannot write '" + part_ + "': " + errno_text() + " (" + kept() + ")");
    }
    if (digest_) digest_->update(buf.data(), got);
    len_ += got;
    done += got;
    side_bytes_ -= std::min<uint64_t>(side_bytes_.load(), got);
  }
  ::unlink(seg.path.c_str());
  report();
  return Status::Ok();
}

StatusOr<DownloadResult> Job::run() {
  if (Status s = open_part(); !s.ok()) return s;
  report();
  for (;;) {
    if (Status s = fetch_parallel(); !s.ok()) return s;
    if (Status s = fetch_until_complete(file_.size); !s.ok()) return s;
    bool again = false;
    if (Status s = verify_and_place(&again); !s.ok()) return s;
    if (!again) return result_;
  }
}

}  // namespace

StatusOr<DownloadResult> download_file(HttpClient* http, const std::string& url,
                                       const RemoteFile& file, const std::string& dest,
                                       const DownloadOptions& options) {
  Job job(http, url, file, dest, options);
  return job.run();
}

}  // namespace glm::hub
