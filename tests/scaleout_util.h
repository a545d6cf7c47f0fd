// Helpers of the many-machines test (scaleout_test.cc): hosts on their own addresses (network
// namespaces joined by a bridge, or loopback addresses where namespaces cannot be made), an
// HTTP client, and glmserve nodes started, killed and drained. Test-only.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process_util.h"

namespace glm::scaleout {

inline bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

// Hosts with addresses of their own. Namespaces: "glm<pid>-sw" holds a bridge; each host is a
// namespace with a veth into it (only its address and loopback); the test's own end is one
// veth in the current namespace with the subnet's .1. Everything is removed when destroyed.
// Without namespaces (not root, or `ip netns add` refused): loopback addresses 127.77.S.x,
// prefix() empty; why_no_netns() says what failed.
class Net {
 public:
  Net() : tag_("glm" + std::to_string(::getpid())) {
    subnet_ = std::to_string(20 + ::getpid() % 200);
    if (std::getenv("GLM_SCALEOUT_NO_NETNS") != nullptr) {
      why_ = "GLM_SCALEOUT_NO_NETNS is set";
    } else if (::geteuid() != 0) {
      why_ = "not root: ip netns needs CAP_SYS_ADMIN";
    } else if (!sh("ip netns add " + tag_ + "-sw 2>/tmp/" + tag_ + ".netns")) {
      why_ = "ip netns add failed (see /tmp/" + tag_ + ".netns)";
    } else {
      made_.push_back(tag_ + "-sw");
      const std::string sw = "ip -n " + tag_ + "-sw ";
      netns_ = sh(sw + "link add br0 type bridge") && sh(sw + "link set br0 up") &&
               sh("ip link add " + tag_ + " type veth peer name p0 netns " + tag_ + "-sw") &&
               sh(sw + "link set p0 master br0 up") &&
               sh("ip addr add 10.77." + subnet_ + ".1/24 dev " + tag_) &&
               sh("ip link set " + tag_ + " up");
      if (!netns_) why_ = "veth or bridge setup failed";
    }
  }
  ~Net() {
    if (!made_.empty()) sh("ip link del " + tag_ + " 2>/dev/null");
    for (const std::string& ns : made_) sh("ip netns del " + ns + " 2>/dev/null");
  }
  bool netns() const { return netns_; }
  const std::string& why_no_netns() const { return why_; }

  // A host numbered `n` (2..250): its address, ready for servers to bind.
  std::string add_host(int n) {
    if (!netns_) return "127.77." + subnet_ + "." + std::to_string(n);
    const std::string ns = tag_ + "-h" + std::to_string(n),
                      ip = "10.77." + subnet_ + "." + std::to_string(n);
    const std::string peer = "p" + std::to_string(n);
    made_.push_back(ns);
    sh("ip netns add " + ns);
    sh("ip -n " + ns + " link add eth0 type veth peer name " + peer + " netns " + tag_ + "-sw");
    sh("ip -n " + tag_ + "-sw link set " + peer + " master br0 up");
    sh("ip -n " + ns + " addr add " + ip + "/24 dev eth0");
    sh("ip -n " + ns + " link set eth0 up");
    sh("ip -n " + ns + " link set lo up");
    ns_of_[ip] = ns;
    return ip;
  }
  // What runs a command on the host at `ip` ("ip netns exec NS " or "").
  std::string prefix(const std::string& ip) const {
    auto it = ns_of_.find(ip);
    return it == ns_of_.end() ? "" : "ip netns exec " + it->second + " ";
  }
  // The arguments (after program(), below) that run `cmd` (program first) on the host at `ip`.
  std::vector<std::string> argv(const std::string& ip, const std::vector<std::string>& cmd) const {
    auto it = ns_of_.find(ip);
    if (it == ns_of_.end()) return std::vector<std::string>(cmd.begin() + 1, cmd.end());
    std::vector<std::string> out = {"netns", "exec", it->second};
    out.insert(out.end(), cmd.begin(), cmd.end());
    return out;
  }
  std::string program(const std::string& ip, const std::string& program) const {
    return ns_of_.count(ip) ? "/usr/sbin/ip" : program;
  }

 private:
  std::string tag_, subnet_, why_;
  bool netns_ = false;
  std::vector<std::string> made_;
  std::map<std::string, std::string> ns_of_;
};

struct Reply {
  int status = 0;  // 0: no answer (the connection failed)
  std::string body, served_by, error;
  nlohmann::json json() const {
    return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  }
};

inline Reply http(const std::string& ip, int port, const std::string& method,
                  const std::string& path, const std::string& body = "",
                  const httplib::Headers& headers = {}) {
  httplib::Client c(ip, port);
  c.set_connection_timeout(3, 0);
  c.set_read_timeout(60, 0);
  httplib::Result r =
      method == "GET" ? c.Get(path, headers) : c.Post(path, headers, body, "application/json");
  Reply out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  out.served_by = r->get_header_value("X-Served-By");
  return out;
}

// Kills a process and everything under it at once (a machine that dies: SIGKILL, no drain).
inline void kill_tree(pid_t pid) {
  std::vector<pid_t> all = {pid};  // the whole tree first: a dead parent's children move away
  for (size_t i = 0; i < all.size(); ++i) {
    for (pid_t child : glm::testing::children_of(all[i])) all.push_back(child);
  }
  for (pid_t p : all) ::kill(p, SIGKILL);
}

}  // namespace glm::scaleout
