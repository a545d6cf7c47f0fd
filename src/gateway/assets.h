// Assets: the chat page's files (web/dist, built by esbuild from web/src), embedded into the
// binary at build time by embed_assets.cmake, so the page works offline with no files beside
// the binary. Each file is stored as is and gzip-compressed (served when the client accepts it).
// Thread-safety: immutable data; safe from any thread.
#pragma once

#include <string_view>

namespace glm::gateway {

struct Asset {
  std::string_view path;          // "/", "/app.js", "/app.css", ...
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
  std::string_view gzip;  // empty if no .gz beside the file
  std::string_view etag;  // "\"<md5>\""
};

// nullptr if no asset has this path.
const Asset* find_asset(std::string_view path);
// Total bytes of the gzip versions (page weight, reported in the log at start).
size_t assets_gzip_bytes();

}  // namespace glm::gateway
