// ControlServer: serve's control socket, through which the gateway (glmserve web
// --models-control PATH) asks for a model's engine (docs/operations.md, "Several models").
// Newline-delimited JSON, one request per connection, one reply line, then serve closes it:
//   > {"type":"ensure","model":"chatglm3-6b:q4_0"}   < {"ok":true,"model":..,"socket":..}
//   > {"type":"models"}                              < {"ok":true,"default":..,"models":[..]}
// An ensure's reply may come much later (the engine loads meanwhile); a client that leaves first
// costs nothing. The socket is created 0600 in serve's private socket directory.
//
// Thread-safety: none; runs on the supervisor's loop (Supervisor::watch). Cost per request: an
// accept, a read and a write of a few hundred bytes.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "serve/model_manager.h"
#include "serve/supervisor.h"

namespace glm::serve {

class ControlServer {
 public:
  ControlServer(ModelManager* manager, Supervisor* supervisor)
      : manager_(manager), supervisor_(supervisor) {}
  ~ControlServer();

  // Creates and listens on `path` (a stale socket file there is replaced), watched by the
  // supervisor from now on.
  Status listen(const std::string& path);

 private:
  struct Conn {
    int fd = -1;
    std::string in;
  };
  void accept_all();
  void on_readable(int fd);
  void handle(int fd, const std::string& line);

  ModelManager* manager_;
  Supervisor* supervisor_;
  int listen_fd_ = -1;
  std::string path_;
  std::map<int, Conn> conns_;  // reading their request
};

}  // namespace glm::serve
