// A model hub for the pull tests, served by Debian's nginx (a real HTTP server we did not write:
// Range requests, keep-alive, rate limits). The test writes files where a Hugging Face-
// compatible hub has them:
//   ROOT/api/models/REPO/tree/REV      the tree answer (static JSON; nginx ignores the query)
//   ROOT/REPO/resolve/REV/PATH         the file's bytes
// and nginx serves ROOT on a free loopback port, as root or not (pid, logs and temp paths in the
// test's directory). /slow/... serves the same tree at a limited rate, so that a test can kill a
// pull or the server mid-file; /norange/... serves it without Range support. The access log holds
// one line per request:
//   URI|STATUS|RANGE|BODY_BYTES_SENT|AUTHORIZATION
// nginx missing is a test failure, not a skip: scripts/install-deps.sh installs it.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace glm::testing {

struct AccessLine {
  std::string uri, range, authorization;
  int status = 0;
  long long body_bytes = 0;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// sha256sum's answer for `path` (coreutils, not our code).
inline std::string sha256sum(const std::string& path) {
  std::string out;
  FILE* p = ::popen(("sha256sum '" + path + "'").c_str(), "r");
  if (p == nullptr) return out;
  char buf[256];
  if (std::fgets(buf, sizeof(buf), p) != nullptr) out = std::string(buf).substr(0, 64);
  ::pclose(p);
  return out;
}

class NginxHub {
 public:
  explicit NginxHub(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_ / "root");
    std::filesystem::create_directories(dir_ / "tmp");
    // nginx's workers may run as another user: they must read ROOT.
    for (const auto& p : {dir_, dir_ / "root"}) ::chmod(p.c_str(), 0755);
  }
  ~NginxHub() { stop(); }

  std::filesystem::path root() const { return dir_ / "root"; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string slow_endpoint() const { return endpoint() + "/slow"; }
  // The same files from a server that ignores Range (answers 200 with the whole file).
  std::string norange_endpoint() const { return endpoint() + "/norange"; }

  void put_file(const std::string& repo, const std::string& rev, const std::string& path,
                const std::string& bytes) {
    write_file(root() / repo / "resolve" / rev / path, bytes);
    chmod_tree();
  }
  void put_tree(const std::string& repo, const std::string& rev, const std::string& json) {
    write_file(root() / "api" / "models" / repo / "tree" / rev, json);
    chmod_tree();
  }

  // nginx location blocks added to the server (before start()).
  void add_locations(const std::string& text) { extra_locations_ += text; }

  // Starts nginx; `slow_rate` is the /slow/ rate limit in bytes/s. False (with the reason in a
  // test failure) when it cannot start.
  bool start(long slow_rate = 100000) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      write_conf(slow_rate);
      pid_ = ::fork();
      if (pid_ == 0) {
        const std::string log = (dir_ / "nginx.stderr").string();
        FILE* f = std::freopen(log.c_str(), "w", stderr);
        (void)f;
        const std::string prefix = dir_.string() + "/";
        const std::string conf = (dir_ / "nginx.conf").string();
        const std::string err = (dir_ / "error.log").string();
        const char* bin = ::access("/usr/sbin/nginx", X_OK) == 0 ? "/usr/sbin/nginx" : "nginx";
        ::execlp(bin, bin, "-p", prefix.c_str(), "-e", err.c_str(), "-c", conf.c_str(), "-g",
                 "daemon off;", static_cast<char*>(nullptr));
        std::fprintf(stderr, "cannot run nginx\n");
        ::_exit(127);
      }
      if (wait_ready()) return true;
      stop();
    }
    ADD_FAILURE() << "nginx did not start (scripts/install-deps.sh installs it): "
                  << read_file((dir_ / "nginx.stderr").string())
                  << read_file((dir_ / "error.log").string());
    return false;
  }

  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);  // fast shutdown
      int st = 0;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }

  // SIGKILLs nginx's worker mid-request (the master starts a new one): the client's connection
  // drops as it would on a network failure.
  bool kill_worker() {
    std::vector<pid_t> workers = children_of(pid_);
    for (pid_t w : workers) ::kill(w, SIGKILL);
    return !workers.empty();
  }

  std::vector<AccessLine> access_log() const {
    std::vector<AccessLine> out;
    std::istringstream in(read_file((dir_ / "access.log").string()));
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> f;
      size_t pos = 0;
      for (;;) {
        const size_t bar = line.find('|', pos);
        f.push_back(line.substr(pos, bar - pos));
        if (bar == std::string::npos) break;
        pos = bar + 1;
      }
      if (f.size() != 5) continue;
      AccessLine a;
      a.uri = f[0];
      a.status = std::atoi(f[1].c_str());
      a.range = f[2] == "-" ? "" : f[2];
      a.body_bytes = std::atoll(f[3].c_str());
      a.authorization = f[4] == "-" ? "" : f[4];
      out.push_back(a);
    }
    return out;
  }

  // The access lines whose URI contains "/resolve/".
  std::vector<AccessLine> downloads() const {
    std::vector<AccessLine> out;
    for (const AccessLine& a : access_log()) {
      if (a.uri.find("/resolve/") != std::string::npos) out.push_back(a);
    }
    return out;
  }

 private:
  void chmod_tree() {
    for (const auto& e : std::filesystem::recursive_directory_iterator(root())) {
      ::chmod(e.path().c_str(), e.is_directory() ? 0755 : 0644);
    }
  }

  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  }

  void write_conf(long slow_rate) const {
    const std::string p = dir_.string();
    std::ostringstream c;
    if (::geteuid() == 0) c << "user root root;\n";  // Debian has no group 'nobody'
    c << "worker_processes 1;\n"
      << "pid " << p << "/nginx.pid;\n"
      << "error_log " << p << "/error.log warn;\n"
      << "events { worker_connections 64; }\n"
      << "http {\n"
      << "  log_format hub '$uri|$status|$http_range|$body_bytes_sent|$http_authorization';\n"
      << "  access_log " << p << "/access.log hub;\n";
    for (const char* t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
      c << "  " << t << "_temp_path " << p << "/tmp/" << t << ";\n";
    }
    c << "  default_type application/octet-stream;\n"
      << "  server {\n"
      << "    listen 127.0.0.1:" << port_ << ";\n"
      << "    root " << p << "/root;\n"
      << "    location /slow/ { alias " << p << "/root/; limit_rate " << slow_rate << "; }\n"
      << "    location /norange/ { alias " << p << "/root/; max_ranges 0; }\n"
      << extra_locations_ << "  }\n"
      << "}\n";
    write_file(dir_ / "nginx.conf", c.str());
  }

  bool wait_ready() {
    for (int i = 0; i < 250; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port_));
      const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      ::close(fd);
      if (ok && !children_of(pid_).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  static std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    if (parent <= 0) return out;
    DIR* d = ::opendir("/proc");
    if (d == nullptr) return out;
    while (dirent* e = ::readdir(d)) {
      const pid_t pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      const std::string stat = read_file("/proc/" + std::string(e->d_name) + "/stat");
      const size_t rp = stat.rfind(')');
      if (rp == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(stat.c_str() + rp + 1, " %c %d", &state, &ppid) == 2 && ppid == parent &&
          state != 'Z') {
        out.push_back(pid);
      }
    }
    ::closedir(d);
    return out;
  }

  std::filesystem::path dir_;
  std::string extra_locations_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace glm::testing
