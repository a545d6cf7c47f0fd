// The resident size of one mapping of this process, from /proc/self/smaps: what tests read to see
// whether a file's pages were mapped in (MappedFile::copy_out maps none). Test-only.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace glm::testing {

// The kB of the mapping that starts at `p` resident in this process (its Rss), or -1 where no
// mapping starts there.
inline long mapping_resident_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::ostringstream start;
  start << std::hex << reinterpret_cast<uintptr_t>(p) << "-";
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.rfind(start.str(), 0) == 0) {
      in = true;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      return std::stol(line.substr(4));
    }
  }
  return -1;
}

}  // namespace glm::testing
