// PgCluster (tests only): a throwaway PostgreSQL cluster in a temporary directory, made with
// Debian's initdb and pg_ctl (/usr/lib/postgresql/NN/bin), listening on a Unix socket in that
// directory (and, when asked, on a TCP address), password authentication (scram-sha-256) for
// user "glm". PostgreSQL refuses to run as root: as root, the cluster runs as the "postgres"
// user (Debian's package makes it), through runuser.
//
// Cost: initdb ~2-5 s on two cores, start ~0.3 s. Not thread-safe.
#pragma once

#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace glm::store::testing {

class PgCluster {
 public:
  static constexpr const char* kUser = "glm";
  static constexpr const char* kPassword = "s3cret-for-tests";

  // Empty when Debian's PostgreSQL server is not installed.
  static std::string bin_dir() {
    DIR* d = ::opendir("/usr/lib/postgresql");
    if (d == nullptr) return "";
    std::string best;
    while (dirent* e = ::readdir(d)) {
      const std::string bin = std::string("/usr/lib/postgresql/") + e->d_name + "/bin";
      if (e->d_name[0] != '.' && ::access((bin + "/initdb").c_str(), X_OK) == 0) best = bin;
    }
    ::closedir(d);
    return best;
  }

  // initdb and start; false (with why() set) when it cannot. `tcp_host`: also listen there
  // (e.g. "127.0.0.1"), on a port of its own, taking password logins from any address.
  // `prefix`: runs the server under it (e.g. "ip netns exec NS ").
  bool start(const std::string& tcp_host = "", const std::string& prefix = "") {
    bin_ = bin_dir();
    if (bin_.empty()) return fail("no PostgreSQL server (apt-get install postgresql)");
    char tmpl[] = "/tmp/glm-pg-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return fail("mkdtemp failed");
    dir_ = tmpl;
    if (::geteuid() == 0) {
      passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) return fail("running as root and there is no 'postgres' user");
      if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) return fail("chown failed");
      as_ = "runuser -u postgres -- ";
    }
    as_ = prefix + as_;
    ::chmod(dir_.c_str(), 0755);
    {
      std::ofstream pw(dir_ + "/pwfile");
      pw << kPassword << "\n";
    }
    ::chmod((dir_ + "/pwfile").c_str(), 0644);
    if (!sh(as_ + bin_ + "/initdb -D " + dir_ + "/data -U " + kUser + " --pwfile=" + dir_ +
            "/pwfile -A scram-sha-256 -E UTF8 --no-sync --no-instructions >" + dir_ +
            "/initdb.log 2>&1")) {
      return fail("initdb failed: " + dir_ + "/initdb.log");
    }
    ::unlink((dir_ + "/pwfile").c_str());
    tcp_host_ = tcp_host;
    if (!tcp_host.empty()) {
      std::ofstream hba(dir_ + "/data/pg_hba.conf", std::ios::app);
      hba << "host all all 0.0.0.0/0 scram-sha-256\n";
    }
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    return restart();
  }

  // Starts it again after stop() (the same data, socket and port).
  bool restart() {
    const std::string listen = tcp_host_.empty() ? "''" : tcp_host_;
    if (!sh(as_ + bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ +
            "/server.log -w -t 30 -o \"-k " + dir_ + " -h " + listen + " -p " +
            std::to_string(port_) +
            " -F -c fsync=off -c max_connections=50\" start >/dev/null 2>&1")) {
      return fail("pg_ctl start failed: " + dir_ + "/server.log");
    }
    return true;
  }

  // An outage: the server dies at once (-m immediate), connections break.
  void stop() {
    if (!dir_.empty()) {
      sh(as_ + bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop >/dev/null 2>&1");
    }
  }

  ~PgCluster() {
    stop();
    if (!dir_.empty() && std::getenv("GLM_KEEP_PG") == nullptr) sh("rm -rf " + dir_);
  }

  // A libpq URL (no password) for database `db` over the Unix socket.
  std::string url(const std::string& db = "postgres") const {
    return "postgresql://" + std::string(kUser) + "@/" + db + "?host=" + dir_ +
           "&port=" + std::to_string(port_);
  }
  // The same over TCP (start(tcp_host) only).
  std::string tcp_url(const std::string& db = "postgres") const {
    return "postgresql://" + std::string(kUser) + "@" + tcp_host_ + ":" + std::to_string(port_) +
           "/" + db;
  }
  // Runs SQL through psql as the cluster's superuser; true when it succeeded.
  bool psql(const std::string& sql, const std::string& db = "postgres") const {
    return sh("PGPASSWORD=" + std::string(kPassword) + " " + bin_ +
              "/psql -X -q -v ON_ERROR_STOP=1 \"" + url(db) + "\" -c \"" + sql +
              "\" >/dev/null 2>&1");
  }
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }
  const std::string& why() const { return why_; }

 private:
  static bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }
  bool fail(const std::string& why) {
    why_ = why;
    return false;
  }
  std::string bin_, dir_, as_, tcp_host_, why_;
  int port_ = 0;
};

}  // namespace glm::store::testing
