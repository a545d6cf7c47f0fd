// One byte range of a large file fetched on its own connection, beside the main download
// (download.h, "parallel"): the bytes [start, end) go to a sidecar file DEST.part.at-START whose
// length is its progress, so a crash or Ctrl-C resumes each range where it stopped. A range that
// cannot be fetched (no Range support, errors past its retries) is left as far as it got: the main
// download fetches the rest itself, in order, so a sidecar only ever saves time.
// Blocking; runs on its own thread with its own HttpClient. Cost: one connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "hub/http.h"

namespace glm::hub {

struct Segment {
  uint64_t start = 0, end = 0;  // bytes [start, end) of the file
  std::string path;             // DEST.part.at-START
};

// The sidecar path of the range starting at `start`.
std::string segment_path(const std::string& part, uint64_t start);

// The sidecars beside `part` (DEST.part), sorted by start; each one's end is the next one's start
// (the last one's: `file_size`).
std::vector<Segment> find_segments(const std::string& part, uint64_t file_size);

// Fetches what `seg`'s sidecar lacks, adding each byte written to *bytes; gives up after
// `max_attempts` attempts in a row without progress, and at once when `stop` is set or the server
// answers without the range. Never throws, never reports: the caller looks at the sidecar's size.
void fetch_segment(const HttpOptions& http, const std::string& url, const Segment& seg,
                   int max_attempts, int64_t backoff_ms, const std::atomic<bool>* stop,
                   std::atomic<uint64_t>* bytes);

}  // namespace glm::hub
