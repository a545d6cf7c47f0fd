// glmserve pull / list / rm and model names, as processes against a real HTTP server (Debian's
// nginx, tests/nginx_hub.h) serving hub-shaped files made by glmserve gen-model: a verified pull,
// a resume after a kill and after a dropped connection (the access log shows what was asked),
// checksum mismatch and hostile tree answers that leave nothing in place, quantization choice,
// list, rm, and a store name given to run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/safetensors.h"
#include "convert/hf_convert.h"
#include "convert/test_util.h"
#include "gguf/gguf.h"
#include "nginx_hub.h"

namespace {

namespace fs = std::filesystem;
using glm::testing::NginxHub;
using glm::testing::read_file;
using glm::testing::sha256sum;

constexpr char kRepo[] = "test-org/Tiny-GLM-GGUF";

struct PullResult {
  int code = -1;
  std::string out, err;
  // The last line of stderr: the one-line error of a failed command.
  std::string error_line() const { return last_of(err); }
  std::string last_line() const { return last_of(out); }
  static std::string last_of(std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    const size_t nl = s.rfind('\n');
    return nl == std::string::npos ? s : s.substr(nl + 1);
  }
};

// The config.json of ChatGLM3's HF checkpoint for a chatglm GGUF model (gen-model's).
nlohmann::json hf_config(const glm::gguf::File& g) {
  return glm::convert::testing::chatglm3_hf_config(g, "test-org/tiny-glm");
}
class HubPullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    dir_ = fs::temp_directory_path() /
           ("glm_hub_pull_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::chmod(dir_.c_str(), 0755);
    hub_ = std::make_unique<NginxHub>(dir_ / "hub");
    store_ = (dir_ / "store").string();
  }
  void TearDown() override {
    hub_.reset();
    fs::remove_all(dir_);
  }

  // Starts glmserve with `args`; stdout and stderr go to files read by finish().
  pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int o = ::open((dir_ / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open((dir_ / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      for (const std::string& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> argv{const_cast<char*>(GLMSERVE_BIN)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(GLMSERVE_BIN, argv.data());
      ::_exit(127);
    }
    return pid;
  }
  PullResult finish(pid_t pid) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    PullResult r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = read_file((dir_ / "out").string());
    r.err = read_file((dir_ / "err").string());
    return r;
  }
  PullResult run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return finish(spawn(args, env));
  }
  PullResult pull(std::vector<std::string> args, const std::string& endpoint = "",
                  const std::vector<std::string>& env = {"GLMSERVE_PULL_BACKOFF_MS=20"}) {
    args.insert(args.begin(), "pull");
    args.push_back("--endpoint");
    args.push_back(endpoint.empty() ? hub_->endpoint() : endpoint);
    args.push_back("--models-dir");
    args.push_back(store_);
    return run(args, env);
  }

  // A random-weight model made by gen-model (tiny preset), its bytes.
  std::string model(const std::string& type, int seed = 1) {
    const std::string path = (dir_ / ("gen_" + type + std::to_string(seed) + ".gguf")).string();
    PullResult r = run({"gen-model", "--arch", "chatglm3", "--preset", "tiny", "--type", type,
                        "--seed", std::to_string(seed), "-o", path});
    EXPECT_EQ(r.code, 0) << r.err;
    return read_file(path);
  }

  // Publishes `files` (path, bytes) under kRepo at `rev`, with a tree answer whose sha256 come
  // from sha256sum; `sha_override` replaces every listed sha256 (a lying hub).
  void publish(const std::vector<std::pair<std::string, std::string>>& files,
               const std::string& rev = "main", const std::string& sha_override = "") {
    publish_in(kRepo, files, rev, sha_override);
  }
  void publish_in(const std::string& repo,
                  const std::vector<std::pair<std::string, std::string>>& files,
                  const std::string& rev = "main", const std::string& sha_override = "") {
    nlohmann::json tree = nlohmann::json::array();
    tree.push_back(
        {{"type", "file"}, {"oid", std::string(40, 'a')}, {"size", 5}, {"path", "README.md"}});
    for (const auto& [path, bytes] : files) {
      hub_->put_file(repo, rev, path, bytes);
      const std::string on_disk = (hub_->root() / repo / "resolve" / rev / path).string();
      if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
        // A small file the hub keeps in git, not LFS: listed by its git blob id.
        tree.push_back({{"type", "file"},
                        {"oid", git_hash_object(on_disk)},
                        {"size", bytes.size()},
                        {"path", path}});
        continue;
      }
      const std::string sha = sha_override.empty() ? sha256sum(on_disk) : sha_override;
      tree.push_back({{"type", "file"},
                      {"oid", std::string(40, 'b')},
                      {"size", bytes.size()},
                      {"path", path},
                      {"lfs", {{"oid", sha}, {"size", bytes.size()}, {"pointerSize", 134}}}});
    }
    tree.push_back(
        {{"type", "directory"}, {"oid", std::string(40, 'c')}, {"size", 0}, {"path", "docs"}});
    hub_->put_tree(repo, rev, tree.dump());
  }

  // git's own blob id of a file (`git hash-object`, not our code).
  static std::string git_hash_object(const std::string& path) {
    std::string out;
    FILE* p = ::popen(("git hash-object '" + path + "'").c_str(), "r");
    char buf[128];
    if (p != nullptr && std::fgets(buf, sizeof(buf), p) != nullptr) out = std::string(buf, 40);
    if (p != nullptr) ::pclose(p);
    return out;
  }

  std::string stored(const std::string& tag) const { return store_ + "/tiny-glm/" + tag + ".gguf"; }
  std::string sha_of(const std::string& bytes) const {
    glm::testing::write_file(dir_ / "sha.tmp", bytes);
    return sha256sum((dir_ / "sha.tmp").string());
  }
  // A partial download of TAG as a killed pull leaves it: the .part with `prefix`, and the
  // .part.json naming the file it belongs to (its size and sha256, docs/hub.md).
  void seed_part(const std::string& tag, const std::string& full, const std::string& prefix) {
    glm::testing::write_file(stored(tag) + ".part", prefix);
    const nlohmann::json m = {{"size", full.size()}, {"sha256", sha_of(full)}, {"git_oid", ""}};
    glm::testing::write_file(stored(tag) + ".part.json", m.dump());
  }
  static uint64_t size_of(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }
  // Waits until `path` holds at least `n` bytes (a download in progress).
  static bool wait_for_bytes(const std::string& path, uint64_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(8);
    while (std::chrono::steady_clock::now() < until) {
      if (size_of(path) >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  fs::path dir_;
  std::unique_ptr<NginxHub> hub_;
  std::string store_;
};

TEST_F(HubPullTest, PullsVerifiesAndNamesTheModel) {
  const std::string bytes = model("q8_0");
  publish({{"tiny-glm.Q8_0.gguf", bytes}});
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({kRepo}, "", {"GLMSERVE_PULL_BACKOFF_MS=20", "HF_TOKEN=sekrit"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.last_line(), stored("q8_0"));
  EXPECT_NE(r.err.find("pulled tiny-glm:q8_0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sha256 verified"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(stored("q8_0")), bytes);
  EXPECT_FALSE(fs::exists(stored("q8_0") + ".part"));
  const auto log = hub_->access_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].uri, std::string("/api/models/") + kRepo + "/tree/main");
  EXPECT_EQ(log[1].uri, std::string("/") + kRepo + "/resolve/main/tiny-glm.Q8_0.gguf");
  EXPECT_EQ(log[1].status, 200);
  EXPECT_EQ(log[1].authorization, "Bearer sekrit");

  // Pulled again: up to date, nothing downloaded.
  r = pull({kRepo, "q8_0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("up to date"), std::string::npos) << r.err;
  EXPECT_EQ(r.last_line(), stored("q8_0"));
  EXPECT_EQ(hub_->downloads().size(), 1u);
}

TEST_F(HubPullTest, ResumesAPartialFileAskingOnlyForTheRest) {
  const std::string bytes = model("f16");
  publish({{"tiny-glm.F16.gguf", bytes}}, "v1");
  ASSERT_TRUE(hub_->start());
  const size_t half = bytes.size() / 2;
  seed_part("f16", bytes, bytes.substr(0, half));
  PullResult r = pull({kRepo, "F16", "--revision", "v1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resumed at"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(r.last_line()), bytes);
  const auto dl = hub_->downloads();
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].range, "bytes=" + std::to_string(half) + "-");
  EXPECT_EQ(dl[0].status, 206);
  EXPECT_EQ(dl[0].body_bytes, static_cast<long long>(bytes.size() - half));
}

TEST_F(HubPullTest, ABadResumedPartIsFetchedAgainWhole) {
  const std::string bytes = model("q8_0");
  publish({{"tiny-glm.Q8_0.gguf", bytes}});
  ASSERT_TRUE(hub_->start());
  seed_part("q8_0", bytes, std::string(bytes.size() / 2, 'x'));  // a corrupt first half
  PullResult r = pull({kRepo});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("mismatch after a resume"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(stored("q8_0")), bytes);
  const auto dl = hub_->downloads();
  ASSERT_EQ(dl.size(), 2u);
  EXPECT_EQ(dl[0].status, 206);
  EXPECT_EQ(dl[1].range, "");
  EXPECT_EQ(dl[1].status, 200);
}

TEST_F(HubPullTest, AKilledPullResumes) {
  const std::string bytes = model("f32");
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start(static_cast<long>(bytes.size() / 2)));  // ~2 s over /slow/
  const pid_t pid =
      spawn({"pull", kRepo, "--endpoint", hub_->slow_endpoint(), "--models-dir", store_});
  ASSERT_TRUE(wait_for_bytes(stored("f32") + ".part", bytes.size() / 5));
  ::kill(pid, SIGKILL);
  PullResult killed = finish(pid);
  EXPECT_EQ(killed.code, -1);
  const uint64_t kept = size_of(stored("f32") + ".part");
  ASSERT_GT(kept, 0u);
  ASSERT_LT(kept, bytes.size());
  EXPECT_FALSE(fs::exists(stored("f32")));

  PullResult r = pull({kRepo});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(sha256sum(r.last_line()),
            sha256sum((hub_->root() / kRepo / "resolve/main/tiny-glm.F32.gguf").string()));
  const auto dl = hub_->downloads();
  ASSERT_FALSE(dl.empty());
  EXPECT_EQ(dl.back().range, "bytes=" + std::to_string(kept) + "-");
  EXPECT_EQ(dl.back().status, 206);
  EXPECT_EQ(dl.back().body_bytes, static_cast<long long>(bytes.size() - kept));
}

TEST_F(HubPullTest, CtrlCKeepsThePartAndSaysHowToResume) {
  const std::string bytes = model("f32");
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start(static_cast<long>(bytes.size() / 2)));
  const pid_t pid =
      spawn({"pull", kRepo, "--endpoint", hub_->slow_endpoint(), "--models-dir", store_});
  ASSERT_TRUE(wait_for_bytes(stored("f32") + ".part", bytes.size() / 5));
  ::kill(pid, SIGINT);
  PullResult r = finish(pid);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("interrupted"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run the same command again to resume"), std::string::npos) << r.err;
  EXPECT_GT(size_of(stored("f32") + ".part"), 0u);
  EXPECT_FALSE(fs::exists(stored("f32")));
}

TEST_F(HubPullTest, ADroppedConnectionIsResumedByTheRetry) {
  const std::string bytes = model("f32");
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start(static_cast<long>(bytes.size() / 2)));
  const pid_t pid =
      spawn({"pull", kRepo, "--endpoint", hub_->slow_endpoint(), "--models-dir", store_},
            {"GLMSERVE_PULL_BACKOFF_MS=20"});
  ASSERT_TRUE(wait_for_bytes(stored("f32") + ".part", bytes.size() / 4));
  ASSERT_TRUE(hub_->kill_worker());
  PullResult r = finish(pid);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("retrying"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(stored("f32")), bytes);
  // The killed worker logged nothing; the retry asked for the rest only.
  const auto dl = hub_->downloads();
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].status, 206);
  EXPECT_NE(dl[0].range, "");
  EXPECT_LT(dl[0].body_bytes, static_cast<long long>(bytes.size()));
}

TEST_F(HubPullTest, AChecksumMismatchStoresNothing) {
  publish({{"tiny-glm.Q8_0.gguf", model("q8_0")}}, "main", std::string(64, '0'));
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({kRepo});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("sha256 mismatch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing was stored"), std::string::npos) << r.err;
  EXPECT_EQ(r.error_line().rfind("glmserve: ", 0), 0u) << r.err;  // one line, last
  EXPECT_FALSE(fs::exists(stored("q8_0")));
  EXPECT_FALSE(fs::exists(stored("q8_0") + ".part"));
  EXPECT_FALSE(fs::exists(store_ + "/tiny-glm/q8_0.json"));
  EXPECT_FALSE(fs::exists(store_ + "/tiny-glm")) << "a failed pull leaves no empty directory";
  PullResult l = run({"list", "--models-dir", store_});
  EXPECT_EQ(l.code, 0);
  EXPECT_EQ(l.out, "");
  // Nor is the name usable.
  PullResult use =
      run({"tokenize", "--model", "tiny-glm:q8_0", "--models-dir", store_, "--text", "x"});
  EXPECT_EQ(use.code, 1);
  EXPECT_NE(use.err.find("no model 'tiny-glm:q8_0' in the store"), std::string::npos) << use.err;
}

TEST_F(HubPullTest, AFileThatIsNotGgufIsRefused) {
  publish({{"tiny-glm.Q8_0.gguf", std::string(5000, 'z')}});
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({kRepo});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not a usable GGUF"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(stored("q8_0")));
  EXPECT_FALSE(fs::exists(stored("q8_0") + ".part"));
  EXPECT_FALSE(fs::exists(store_ + "/tiny-glm")) << "a failed pull leaves no empty directory";
}

TEST_F(HubPullTest, ChoosesByQuantizationAndListsChoices) {
  publish({{"tiny-glm.Q8_0.gguf", model("q8_0")}, {"tiny-glm.Q4_0.gguf", model("q4_0")}});
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({kRepo});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("holds 2 GGUF files"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("q4_0 = tiny-glm.Q4_0.gguf"), std::string::npos) << r.err;
  r = pull({kRepo, "Q5_1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no GGUF file in test-org/Tiny-GLM-GGUF matches 'Q5_1'"), std::string::npos)
      << r.err;
  EXPECT_TRUE(hub_->downloads().empty());
  r = pull({kRepo, "q4_0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.last_line(), stored("q4_0"));
  r = pull({kRepo, "tiny-glm.Q8_0.gguf"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.last_line(), stored("q8_0"));
}

TEST_F(HubPullTest, MissingRepoOrFileIsOneLineNamingIt) {
  publish({{"tiny-glm.Q8_0.gguf", model("q8_0")}});
  fs::remove(hub_->root() / kRepo / "resolve/main/tiny-glm.Q8_0.gguf");  // listed, not served
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({"test-org/nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("repository test-org/nope (revision main)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  EXPECT_EQ(r.error_line().rfind("glmserve: ", 0), 0u) << r.err;  // one line, last
  r = pull({kRepo});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("tiny-glm.Q8_0.gguf is not at"), std::string::npos) << r.err;
  r = pull({"../../etc"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not a repository id"), std::string::npos) << r.err;
  // Nothing listens here: the error says so, after a few quick retries.
  r = pull({kRepo}, "http://127.0.0.1:1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot read the file list"), std::string::npos) << r.err;
}

TEST_F(HubPullTest, HostileTreeAnswersNeverWriteOutsideTheStore) {
  const std::string bytes = model("q8_0");
  const std::string sha = sha_of(bytes);
  hub_->put_file(kRepo, "main", "../../escape.Q8_0.gguf", bytes);
  ASSERT_TRUE(hub_->start());
  const std::vector<std::string> trees = {
      R"([{"type":"file","path":"../../escape.Q8_0.gguf","size":)" + std::to_string(bytes.size()) +
          R"(,"lfs":{"oid":")" + sha + R"("}}])",
      R"([{"type":"file","path":"/tmp/escape.gguf","size":1}])",
      R"({"error":"nope"})",
      R"([{"type":"file","path":"a.gguf","size":{"x":1}}])",
      "[" + std::string(5000, '[') + std::string(5000, ']') + "]",
  };
  for (const std::string& tree : trees) {
    hub_->put_tree(kRepo, "main", tree);
    PullResult r = pull({kRepo});
    EXPECT_EQ(r.code, 1) << tree.substr(0, 80);
    EXPECT_EQ(r.error_line().rfind("glmserve: ", 0), 0u) << r.err;  // one line, last
    EXPECT_NE(r.err.find("the file list of test-org/Tiny-GLM-GGUF"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(hub_->downloads().empty());
  EXPECT_FALSE(fs::exists(store_));  // not even a directory was made
  PullResult r = pull({kRepo, "--name", "../x"});
  EXPECT_EQ(r.code, 2);
}

TEST_F(HubPullTest, ListRemoveAndNamesInRun) {
  publish({{"tiny-glm.Q8_0.gguf", model("q8_0")}, {"tiny-glm.F16.gguf", model("f16")}});
  ASSERT_TRUE(hub_->start());
  ASSERT_EQ(pull({kRepo, "q8_0"}).code, 0);
  ASSERT_EQ(pull({kRepo, "f16"}).code, 0);
  PullResult l = run({"list", "--models-dir", store_});
  ASSERT_EQ(l.code, 0) << l.err;
  std::istringstream lines(l.out);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    rows.push_back(w);
  }
  ASSERT_EQ(rows.size(), 2u) << l.out;
  // NAME SIZE(2 words) TYPE ARCH CONTEXT
  EXPECT_EQ(rows[0][0], "tiny-glm:f16");
  EXPECT_EQ(rows[0][3], "F16");
  EXPECT_EQ(rows[0][4], "chatglm");
  EXPECT_EQ(rows[1][0], "tiny-glm:q8_0");
  EXPECT_EQ(rows[1][3], "Q8_0");
  l = run({"list", "--models-dir", store_, "--json"});
  ASSERT_EQ(l.code, 0);
  auto j = nlohmann::json::parse(l.out.substr(0, l.out.find('\n')));
  EXPECT_EQ(j["repo"], kRepo);
  EXPECT_GT(j["context"].get<int>(), 0);

  // A name wherever a model file is taken: run, with the store from the flag or the environment.
  PullResult g = run({"run", "--model", "tiny-glm:q8_0", "--models-dir", store_, "--prompt", "hi",
                      "-n", "2", "--temp", "0", "--quiet"});
  EXPECT_EQ(g.code, 0) << g.err;
  g = run({"tokenize", "--model", "tiny-glm:f16", "--text", "hi"}, {"GLMSERVE_MODELS=" + store_});
  EXPECT_EQ(g.code, 0) << g.err;
  g = run({"tokenize", "--model", "tiny-glm", "--text", "hi"}, {"GLMSERVE_MODELS=" + store_});
  EXPECT_EQ(g.code, 1);  // two tags: which one is said
  EXPECT_NE(g.err.find("it holds tiny-glm:f16 tiny-glm:q8_0"), std::string::npos) << g.err;

  PullResult rm = run({"rm", "tiny-glm:f16", "--models-dir", store_});
  ASSERT_EQ(rm.code, 0) << rm.err;
  EXPECT_FALSE(fs::exists(stored("f16")));
  l = run({"list", "--models-dir", store_});
  EXPECT_EQ(l.out.find("tiny-glm:f16"), std::string::npos);
  EXPECT_NE(l.out.find("tiny-glm:q8_0"), std::string::npos);
  rm = run({"rm", "tiny-glm:f16", "--models-dir", store_});
  EXPECT_EQ(rm.code, 1);
  EXPECT_NE(rm.err.find("no model 'tiny-glm:f16'"), std::string::npos) << rm.err;
  g = run({"tokenize", "--model", "tiny-glm", "--text", "hi", "--models-dir", store_});
  EXPECT_EQ(g.code, 0) << g.err;  // the one tag left
}

// An HF checkpoint repository (config.json, model.safetensors, tokenizer.model): pulled, its
// files verified (git blob ids for the JSON, sha256 for the rest), converted, quantized to
// --type, and stored as BASE:TYPE; the GGUF is the one `glmserve convert` writes from the same
// directory, and runs by its name.
TEST_F(HubPullTest, ACheckpointRepoIsPulledConvertedAndRuns) {
  const std::string tok = std::string(GLM_SHARED_DATA) + "/tokenizers/chatglm3.tokenizer.model";
  if (!fs::exists(tok)) GTEST_SKIP() << "absent: " << tok;
  const std::string gen = (dir_ / "gen.gguf").string();
  PullResult r = run({"gen-model", "--arch", "chatglm3", "--preset", "tiny", "--type", "f32",
                      "--vocab", tok, "-o", gen});
  ASSERT_EQ(r.code, 0) << r.err;
  // The checkpoint: config.json from the metadata, the F32 tensors under their HF names.
  auto m = glm::gguf::File::open(gen);
  ASSERT_TRUE(m.ok());
  const glm::gguf::File& g = **m;
  const nlohmann::json config = hf_config(g);
  std::vector<glm::checkpoint::StTensorOut> tensors;
  for (const glm::gguf::TensorInfo& t : g.tensors()) {
    ASSERT_EQ(t.type, glm::DType::kF32);
    glm::checkpoint::StTensorOut o;
    o.name = glm::convert::hf_tensor_name(t.name);
    ASSERT_FALSE(o.name.empty()) << t.name;
    o.dtype = "F32";
    o.shape.assign(t.shape.rbegin(), t.shape.rend());
    o.data.assign(t.data, t.data + t.n_bytes);
    tensors.push_back(std::move(o));
  }
  const fs::path ck = dir_ / "checkpoint";
  fs::create_directories(ck);
  ASSERT_TRUE(
      glm::checkpoint::write_safetensors((ck / "model.safetensors").string(), tensors).ok());
  glm::testing::write_file(ck / "config.json", config.dump(2));
  glm::testing::write_file(ck / "tokenizer_config.json", R"({"padding_side":"left"})");
  fs::copy_file(tok, ck / "tokenizer.model");
  const std::string repo = "test-org/Tiny-GLM-HF";
  std::vector<std::pair<std::string, std::string>> files;
  for (const char* f :
       {"config.json", "tokenizer_config.json", "tokenizer.model", "model.safetensors"}) {
    files.push_back({f, read_file((ck / f).string())});
  }
  files.push_back({"modeling_chatglm.py", "# not needed"});
  publish_in(repo, files);
  ASSERT_TRUE(hub_->start());

  r = pull({repo, "--type", "q8_0"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string stored_path = store_ + "/tiny-glm-hf/q8_0.gguf";
  EXPECT_EQ(r.last_line(), stored_path);
  EXPECT_NE(r.err.find("converted tiny-glm-hf:q8_0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("pulled "), std::string::npos) << r.err;     // one report of what it did
  EXPECT_FALSE(fs::exists(store_ + "/.staging/tiny-glm-hf-main"));  // only the GGUF is kept
  for (const auto& a : hub_->downloads()) {
    EXPECT_EQ(a.uri.find("modeling_chatglm.py"), std::string::npos);  // not needed, not fetched
  }
  PullResult c =
      run({"convert", ck.string(), "-o", (dir_ / "direct.gguf").string(), "--type", "q8_0"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(read_file(stored_path) == read_file((dir_ / "direct.gguf").string()));
  PullResult g2 = run({"run", "--model", "tiny-glm-hf:q8_0", "--models-dir", store_, "--prompt",
                       "hi", "-n", "2", "--temp", "0", "--quiet"});
  EXPECT_EQ(g2.code, 0) << g2.err;
  r = pull({repo, "--type", "q8_0"});  // the same checkpoint: nothing fetched or converted again
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("up to date"), std::string::npos) << r.err;
}

// A PEFT LoRA repository (what ChatGLM3's finetune_demo uploads: adapter_config.json,
// adapter_model.safetensors, tokenizer and training files beside them): only the adapter's two
// files are fetched, converted as `glmserve convert` does, stored as BASE:lora, listed as an
// adapter, and merged into a model by its store name; a second pull is up to date.
TEST_F(HubPullTest, AnAdapterRepoIsPulledConvertedAndUsedByName) {
  const std::string base = (dir_ / "base.gguf").string();
  const std::string lora = (dir_ / "lora.gguf").string();
  ASSERT_EQ(
      run({"gen-model", "--arch", "chatglm3", "--preset", "tiny", "--type", "f32", "-o", base})
          .code,
      0);
  PullResult r = run({"gen-model", "--lora-of", base, "--rank", "4", "--alpha", "8", "-o", lora});
  ASSERT_EQ(r.code, 0) << r.err;
  // PEFT's layout of the same pairs: lora_A [r, in] and lora_B [out, r] under the HF module names.
  auto lf = glm::gguf::File::open(lora);
  ASSERT_TRUE(lf.ok());
  std::vector<glm::checkpoint::StTensorOut> tensors;
  std::set<std::string> targets;
  for (const glm::gguf::TensorInfo& t : (*lf)->tensors()) {
    const bool a = t.name.size() > 7 && t.name.substr(t.name.size() - 7) == ".lora_a";
    const std::string weight = t.name.substr(0, t.name.size() - 7);  // blk.N.X.weight
    std::string module = glm::convert::hf_tensor_name(weight);
    ASSERT_FALSE(module.empty()) << t.name;
    module.resize(module.size() - std::string(".weight").size());
    targets.insert(module.substr(module.rfind('.') + 1));
    glm::checkpoint::StTensorOut o;
    o.name = "base_model.model." + module + (a ? ".lora_A.weight" : ".lora_B.weight");
    ASSERT_EQ(t.type, glm::DType::kF32) << t.name;
    o.dtype = "F32";
    o.shape.assign(t.shape.rbegin(), t.shape.rend());
    o.data.assign(t.data, t.data + t.n_bytes);
    tensors.push_back(std::move(o));
  }
  const fs::path peft = dir_ / "peft";
  fs::create_directories(peft);
  ASSERT_TRUE(
      glm::checkpoint::write_safetensors((peft / "adapter_model.safetensors").string(), tensors)
          .ok());
  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"task_type", "CAUSAL_LM"},
                                 {"r", 4},
                                 {"lora_alpha", 8},
                                 {"target_modules", targets},
                                 {"base_model_name_or_path", "test-org/tiny-glm"}};
  glm::testing::write_file(peft / "adapter_config.json", config.dump(2));
  const std::string repo = "test-org/Tiny-GLM-Advertise-LoRA";
  publish_in(repo, {{"adapter_config.json", read_file((peft / "adapter_config.json").string())},
                    {"adapter_model.safetensors",
                     read_file((peft / "adapter_model.safetensors").string())},
                    {"tokenizer_config.json", R"({"padding_side":"left"})"},
                    {"training_args.bin", "not needed"}});
  ASSERT_TRUE(hub_->start());

  r = pull({repo});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string stored_path = store_ + "/tiny-glm-advertise-lora/lora.gguf";
  EXPECT_EQ(r.last_line(), stored_path);
  EXPECT_NE(r.err.find("tiny-glm-advertise-lora:lora is a LoRA adapter"), std::string::npos)
      << r.err;
  for (const auto& d : hub_->downloads()) {  // the adapter's two files only
    EXPECT_EQ(d.uri.find("training_args"), std::string::npos) << d.uri;
    EXPECT_EQ(d.uri.find("tokenizer_config"), std::string::npos) << d.uri;
  }
  EXPECT_FALSE(fs::exists(store_ + "/.staging/tiny-glm-advertise-lora-main"));
  PullResult c = run({"convert", peft.string(), "-o", (dir_ / "direct.gguf").string()});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(read_file(stored_path) == read_file((dir_ / "direct.gguf").string()));

  PullResult l = run({"list", "--json", "--models-dir", store_});
  ASSERT_EQ(l.code, 0) << l.err;
  const nlohmann::json entry = nlohmann::json::parse(l.last_line());
  EXPECT_EQ(entry.value("name", ""), "tiny-glm-advertise-lora:lora");
  EXPECT_EQ(entry.value("adapter", ""), "lora");

  // Merged by its store name: the same answer as by its path; and not the bare model's.
  auto answer = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> a = {"run", "--model", base, "--prompt", "hi",           "-n",
                                  "6",   "--temp",  "0",  "--quiet",  "--models-dir", store_};
    a.insert(a.end(), extra.begin(), extra.end());
    PullResult g = run(a);
    EXPECT_EQ(g.code, 0) << g.err;
    return g.out;
  };
  const std::string by_name = answer({"--lora", "tiny-glm-advertise-lora:lora:3"});
  EXPECT_EQ(by_name, answer({"--lora", stored_path + ":3"}));
  EXPECT_NE(by_name, answer({}));
  PullResult missing = run({"run", "--model", base, "--lora", "nothing-here:lora", "--models-dir",
                            store_, "--prompt", "hi", "-n", "1"});
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.error_line().find("--lora"), std::string::npos) << missing.err;

  r = pull({repo});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("tiny-glm-advertise-lora:lora is up to date"), std::string::npos) << r.err;
}

// A P-Tuning v2 checkpoint repository (config.json with pre_seq_len, the prefix encoder's
// weights): converted to the P-Tuning adapter `glmserve convert` writes, stored as BASE:ptuning.
TEST_F(HubPullTest, APtuningRepoIsStoredAsAnAdapter) {
  const std::string base = (dir_ / "base.gguf").string();
  ASSERT_EQ(
      run({"gen-model", "--arch", "chatglm3", "--preset", "tiny", "--type", "f32", "-o", base})
          .code,
      0);
  auto m = glm::gguf::File::open(base);
  ASSERT_TRUE(m.ok());
  nlohmann::json config = hf_config(**m);
  config["pre_seq_len"] = 4;
  config["prefix_projection"] = false;
  const int64_t width = 2 * config["num_layers"].get<int64_t>() *
                        config["multi_query_group_num"].get<int64_t>() *
                        config["kv_channels"].get<int64_t>();
  std::vector<float> emb(static_cast<size_t>(4 * width));
  for (size_t k = 0; k < emb.size(); ++k) emb[k] = 0.01f * static_cast<float>(k % 97) - 0.4f;
  glm::checkpoint::StTensorOut t;
  t.name = "transformer.prefix_encoder.embedding.weight";
  t.dtype = "F32";
  t.shape = {4, width};
  t.data.resize(emb.size() * 4);
  std::memcpy(t.data.data(), emb.data(), t.data.size());
  const fs::path ck = dir_ / "src" / "Tiny-GLM-PT";  // general.name is the folder's name
  fs::create_directories(ck);
  ASSERT_TRUE(glm::checkpoint::write_safetensors((ck / "model.safetensors").string(), {t}).ok());
  glm::testing::write_file(ck / "config.json", config.dump(2));
  const std::string repo = "test-org/Tiny-GLM-PT";
  publish_in(repo, {{"config.json", read_file((ck / "config.json").string())},
                    {"model.safetensors", read_file((ck / "model.safetensors").string())}});
  ASSERT_TRUE(hub_->start());

  PullResult r = pull({repo});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string stored_path = store_ + "/tiny-glm-pt/ptuning.gguf";
  EXPECT_EQ(r.last_line(), stored_path);
  EXPECT_NE(r.err.find("is a P-Tuning v2 adapter"), std::string::npos) << r.err;
  PullResult c = run({"convert", ck.string(), "-o", (dir_ / "direct.gguf").string()});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(read_file(stored_path) == read_file((dir_ / "direct.gguf").string()));
  r = pull({repo});  // up to date under the name it got, not re-converted
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("tiny-glm-pt:ptuning is up to date"), std::string::npos) << r.err;
}

// A tree answer in pages (the hub's Link: <...>; rel="next" header) is read to the end; a Link to
// another host is refused.
TEST_F(HubPullTest, FollowsPagedTreeAnswers) {
  publish({{"tiny-glm.Q8_0.gguf", model("q8_0")}});
  const fs::path tree = hub_->root() / "api/models" / kRepo / "tree";
  fs::rename(tree / "main", tree / "page2");
  glm::testing::write_file(tree / "main", R"([{"type":"file","path":"README.md","size":5}])");
  glm::testing::write_file(tree / "evil", R"([{"type":"file","path":"README.md","size":5}])");
  hub_->add_locations(std::string("location = /api/models/") + kRepo +
                      "/tree/main { add_header Link "
                      "'<http://$host:$server_port/api/models/" +
                      kRepo + "/tree/page2?cursor=x>; rel=\"next\"'; }\n" +
                      "location = /api/models/" + kRepo +
                      "/tree/evil { add_header Link '<http://localhost:1/x>; rel=\"next\"'; }\n");
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({kRepo});
  ASSERT_EQ(r.code, 0) << r.err;  // the only GGUF is on page 2
  EXPECT_EQ(r.last_line(), stored("q8_0"));
  r = pull({kRepo, "--revision", "evil"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.error_line().find("links its next page outside"), std::string::npos) << r.err;
}

// A server that ignores Range answers 200 with the whole file: the .part is started over, never
// appended to.
TEST_F(HubPullTest, AServerIgnoringRangeStartsThePartOver) {
  const std::string bytes = model("q8_0");
  publish({{"tiny-glm.Q8_0.gguf", bytes}});
  ASSERT_TRUE(hub_->start());
  seed_part("q8_0", bytes, bytes.substr(0, bytes.size() / 2));
  PullResult r = pull({kRepo}, hub_->norange_endpoint());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("ignored the Range request"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(stored("q8_0")), bytes);
  const auto dl = hub_->downloads();
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].status, 200);
  EXPECT_EQ(dl[0].body_bytes, static_cast<long long>(bytes.size()));
}

// Parallel connections (docs/hub.md): a file with ranges of at least the minimum segment comes
// over --connections N connections, the first in order into the .part, each other range into its
// own sidecar, merged in order before the sha256 check; nothing of them is left behind.
const std::vector<std::string> kSmallSegments = {"GLMSERVE_PULL_BACKOFF_MS=20",
                                                 "GLMSERVE_PULL_MIN_SEGMENT_BYTES=65536"};

std::vector<std::string> sidecars(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string().find(".part.at-") != std::string::npos) out.push_back(e.path());
  }
  return out;
}

TEST_F(HubPullTest, ALargeFileComesOverSeveralConnections) {
  const std::string bytes = model("f32");
  ASSERT_GT(bytes.size(), 3u * 65536);
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({kRepo, "--connections", "3"}, "", kSmallSegments);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("over 3 connections"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(stored("f32")), bytes);
  const auto dl = hub_->downloads();
  std::vector<std::string> ranges;
  for (const auto& d : dl) ranges.push_back(d.range);
  std::sort(ranges.begin(), ranges.end());
  const uint64_t n = bytes.size();
  std::vector<std::string> expected = {"", "bytes=" + std::to_string(n / 3) + "-",
                                       "bytes=" + std::to_string(n * 2 / 3) + "-"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ranges, expected);
  EXPECT_TRUE(sidecars(store_ + "/tiny-glm").empty());
}

TEST_F(HubPullTest, AKilledParallelPullResumesEveryRangeWhereItStopped) {
  const std::string bytes = model("f32");
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start(static_cast<long>(bytes.size() / 2)));  // each connection ~0.7 s
  const std::string part = stored("f32") + ".part";
  const uint64_t n = bytes.size();
  const std::string side1 = part + ".at-" + std::to_string(n / 3);
  const std::string side2 = part + ".at-" + std::to_string(n * 2 / 3);
  std::vector<std::string> env = kSmallSegments;
  const pid_t pid = spawn({"pull", kRepo, "--connections", "3", "--endpoint", hub_->slow_endpoint(),
                           "--models-dir", store_},
                          env);
  ASSERT_TRUE(wait_for_bytes(part, n / 12));
  ASSERT_TRUE(wait_for_bytes(side1, n / 12));
  ASSERT_TRUE(wait_for_bytes(side2, n / 12));
  ::kill(pid, SIGKILL);
  finish(pid);
  const uint64_t p = size_of(part), s1 = size_of(side1), s2 = size_of(side2);
  ASSERT_LT(p, n / 3);
  ASSERT_LT(s1, n * 2 / 3 - n / 3);
  ASSERT_LT(s2, n - n * 2 / 3);

  PullResult r = pull({kRepo, "--connections", "3"}, "", kSmallSegments);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(stored("f32")), bytes);
  // Each range was asked again from where its file stopped, not from its start.
  std::vector<std::string> ranges;
  for (const auto& d : hub_->downloads()) ranges.push_back(d.range);
  for (const uint64_t at : {p, n / 3 + s1, n * 2 / 3 + s2}) {
    const std::string want = "bytes=" + std::to_string(at) + "-";
    EXPECT_NE(std::find(ranges.begin(), ranges.end(), want), ranges.end()) << want;
  }
  EXPECT_TRUE(sidecars(store_ + "/tiny-glm").empty());
}

TEST_F(HubPullTest, RmRemovesAKilledParallelPullsRanges) {
  const std::string bytes = model("f32");
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start(static_cast<long>(bytes.size() / 2)));
  const std::string part = stored("f32") + ".part";
  const pid_t pid = spawn({"pull", kRepo, "--connections", "3", "--endpoint", hub_->slow_endpoint(),
                           "--models-dir", store_},
                          kSmallSegments);
  ASSERT_TRUE(wait_for_bytes(part + ".at-" + std::to_string(bytes.size() / 3), 1));
  ::kill(pid, SIGKILL);
  finish(pid);
  ASSERT_FALSE(sidecars(store_ + "/tiny-glm").empty());
  PullResult r = run({"rm", "tiny-glm:f32", "--models-dir", store_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(store_ + "/tiny-glm"));  // nothing left, the directory too
}

TEST_F(HubPullTest, ParallelOnAServerWithoutRangesStillEndsRight) {
  const std::string bytes = model("f32");
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start());
  PullResult r = pull({kRepo, "--connections", "3"}, hub_->norange_endpoint(), kSmallSegments);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(stored("f32")), bytes);
  EXPECT_TRUE(sidecars(store_ + "/tiny-glm").empty());
}

// Two pulls of one file: the second is refused while the first writes, and the first finishes.
// HF_ENDPOINT stands for --endpoint.
TEST_F(HubPullTest, TwoPullsOfOneFileExcludeEachOther) {
  const std::string bytes = model("f32");
  publish({{"tiny-glm.F32.gguf", bytes}});
  ASSERT_TRUE(hub_->start(static_cast<long>(bytes.size())));
  const pid_t first =
      spawn({"pull", kRepo, "--models-dir", store_}, {"HF_ENDPOINT=" + hub_->slow_endpoint()});
  ASSERT_TRUE(wait_for_bytes(stored("f32") + ".part", 1));
  // finish() reads dir_/err, which the second process overwrites: wait for the first one after.
  PullResult second = run({"pull", kRepo, "--models-dir", store_, "--endpoint", hub_->endpoint()});
  EXPECT_EQ(second.code, 1);
  EXPECT_NE(second.error_line().find("another glmserve pull is writing"), std::string::npos)
      << second.err;
  int st = 0;
  ::waitpid(first, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(read_file(stored("f32")), bytes);
  ASSERT_FALSE(hub_->downloads().empty());
  EXPECT_EQ(hub_->downloads()[0].uri.rfind("/slow/", 0), 0u);  // HF_ENDPOINT was used
}

}  // namespace
