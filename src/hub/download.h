// One file from the hub into place, resumable and verified:
//   DEST.part       the bytes so far; its length is the offset the next attempt asks for
//                   ("Range: bytes=LEN-"), after a dropped connection, a crash, Ctrl-C or kill
//   DEST.part.json  what the .part holds ({"url","size","sha256"}): a .part of another file or
//                   version is started over, never mixed
// Attempts that make no progress are retried with exponential backoff; the whole file's digest
// (SHA-256 for LFS files, the git blob SHA-1 otherwise) is checked before an atomic rename to
// DEST, so a file that fails never appears under its name (its .part is discarded). A .part that
// was resumed and then fails its digest is fetched once more from byte 0 before giving up.
// Two pulls of one file exclude each other (flock on the .part). Blocking; not thread-safe.
// Parallel: a file with at least 2 x min_segment_bytes left comes over up to `connections`
// connections: the .part grows in order on the first, and each other range goes to its own
// sidecar (segment.h: DEST.part.at-START, resumable the same way) on its own thread; the .part
// takes each sidecar's bytes in order (the digest still reads the file once, in order) and fetches
// itself whatever a sidecar did not get.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "hub/http.h"
#include "hub/tree.h"

namespace glm::hub {

struct DownloadOptions {
  int max_attempts = 10;     // consecutive attempts without a new byte before giving up
  int64_t backoff_ms = 500;  // the first retry's wait; doubles per attempt, up to 30 s
  int64_t max_backoff_ms = 30000;
  int connections = 4;                       // per file, when it is large enough
  uint64_t min_segment_bytes = 16ull << 20;  // no range smaller than this gets its own
  // Called as bytes arrive: (bytes in the .part, total); also once with the resumed offset.
  std::function<void(uint64_t done, uint64_t total)> progress;
  std::function<void(const std::string& note)> note;  // "resuming at 1.2 GB", "retry 2 in 1 s"
  const std::atomic<bool>* cancel = nullptr;
  // Runs on the verified .part just before the rename (a format check, the manifest); an error
  // discards the download and is returned.
  std::function<Status(const std::string& part_path)> before_place;
};

struct DownloadResult {
  uint64_t resumed_from = 0;   // bytes of an earlier .part that were kept
  uint64_t bytes_fetched = 0;  // bytes received over the network
  int attempts = 0;            // requests made
};

// Downloads `file` from `url` to `dest`. kCancelled when `cancel` was set (the .part stays for a
// resume); kBadFile on a digest or size mismatch (nothing kept); kNotFound / kUnauthorized on a
// 404 / 401-403; kUnavailable when the retries ran out (the .part stays).
StatusOr<DownloadResult> download_file(HttpClient* http, const std::string& url,
                                       const RemoteFile& file, const std::string& dest,
                                       const DownloadOptions& options);

}  // namespace glm::hub
