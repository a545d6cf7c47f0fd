// The adapters an engine was given at run time (load_adapter / unload_adapter on its socket,
// docs/adapters.md), kept in a small JSON file so that an engine restarted by serve after a crash
// serves them again: [{"name","path","scale"}, ...]. The daemon writes the engine's adapters after
// each load or unload; `glmserve engine --adapter-state FILE` reads them back at start, after its
// --adapter flags. Pure file I/O; callers serialize (one daemon writes).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace glm::daemon {

// Writes `adapters` to `path` (a temporary file renamed over it: a crash leaves the old list or
// the new, never half of one). Errors name the path.
Status save_adapter_state(const std::string& path,
                          const std::vector<engine::AdapterSpec>& adapters);

// The list in `path`; a missing file is an empty list. A file that is not such a list (bad JSON,
// a bad name, a scale that is not a finite number) is bad_file naming the path and the entry:
// the caller serves without it, nothing from it is run or trusted beyond a name, a path to read
// as an adapter, and a scale.
StatusOr<std::vector<engine::AdapterSpec>> read_adapter_state(const std::string& path);

}  // namespace glm::daemon
