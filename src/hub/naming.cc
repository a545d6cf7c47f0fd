#include "hub/naming.h"

#include <regex>

namespace glm::hub {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

bool valid_part(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '.') return false;
  for (char c : s) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string human_size(uint64_t n) {
  char buf[32];
  if (n >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(n) / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(n) / 1e6);
  }
  return buf;
}

// "  Q4_0  chatglm3-6b.Q4_0.gguf (3.6 GB)" lines for an error message.
std::string choices(const std::vector<const RemoteFile*>& files) {
  std::string out;
  for (const RemoteFile* f : files) {
    const std::string q = quant_of_file(f->path);
    out +=
        "; " + (q.empty() ? std::string() : q + " = ") + f->path + " (" + human_size(f->size) + ")";
  }
  return out.empty() ? out : out.substr(2);
}

bool is_split(const std::string& path) {
  static const std::regex kSplit("-[0-9]{5}-of-[0-9]{5}\\.gguf$", std::regex::icase);
  return std::regex_search(path, kSplit);
}

}  // namespace

std::optional<ModelName> parse_model_name(const std::string& s) {
  const std::string l = lower(s);
  ModelName n;
  const size_t colon = l.find(':');
  n.base = l.substr(0, colon);
  if (colon != std::string::npos) {
    n.tag = l.substr(colon + 1);
    if (!valid_part(n.tag)) return std::nullopt;
  }
  if (!valid_part(n.base)) return std::nullopt;
  return n;
}

std::string sanitize_name_part(const std::string& s) {
  std::string out;
  for (char c : lower(s)) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    out += ok ? c : '-';
  }
  const size_t first = out.find_first_not_of(".-");
  out = first == std::string::npos ? "" : out.substr(first);
  if (out.size() > 128) out.resize(128);
  return out.empty() ? "model" : out;
}

std::string base_name_for_repo(const std::string& repo) {
  std::string b = lower(basename_of(repo));
  for (const char* suffix : {"-gguf", "_gguf", ".gguf"}) {
    if (ends_with(b, suffix) && b.size() > 5) {
      b.resize(b.size() - 5);
      break;
    }
  }
  return sanitize_name_part(b);
}

std::string quant_of_file(const std::string& file_name) {
  // A quantization is a separate word of the name: q4_0, q4_k_m, iq4_xs, f16, bf16, fp16...
  static const std::regex kQuant(
      "(^|[-._])(i?q[0-9]+(_[a-z0-9]+)*|bf16|fp16|fp32|f16|f32)(?=[-.]|$)");
  std::string stem = lower(basename_of(file_name));
  if (ends_with(stem, ".gguf")) stem.resize(stem.size() - 5);
  std::string found;
  for (auto it = std::sregex_iterator(stem.begin(), stem.end(), kQuant);
       it != std::sregex_iterator(); ++it) {
    found = (*it)[2].str();
  }
  if (found == "fp16") return "f16";
  if (found == "fp32") return "f32";
  return found;
}

std::string tag_for_file(const std::string& path) {
  std::string q = quant_of_file(path);
  if (!q.empty()) return q;
  std::string stem = lower(basename_of(path));
  if (ends_with(stem, ".gguf")) stem.resize(stem.size() - 5);
  return sanitize_name_part(stem);
}

bool is_gguf(const std::string& path) { return ends_with(lower(path), ".gguf"); }

StatusOr<RemoteFile> select_gguf(const std::vector<RemoteFile>& files, const std::string& want,
                                 const std::string& repo) {
  std::vector<const RemoteFile*> ggufs;
  for (const RemoteFile& f : files) {
    if (is_gguf(f.path)) ggufs.push_back(&f);
  }
  auto checked = [&](const RemoteFile* f) -> StatusOr<RemoteFile> {
    if (is_split(f->path)) {
      return unsupported(f->path +
                         " is one part of a split GGUF; glmserve reads single-file GGUF "
                         "(merge the parts with llama.cpp's gguf-split --merge)");
    }
    return *f;
  };
  if (ggufs.empty()) return not_found(repo + " holds no .gguf file");
  if (want.empty()) {
    if (ggufs.size() == 1) return checked(ggufs[0]);
    return invalid_argument(repo + " holds " + std::to_string(ggufs.size()) +
                            " GGUF files; name one (glmserve pull " + repo +
                            " QUANT|FILE): " + choices(ggufs));
  }
  for (const RemoteFile* f : ggufs) {
    if (f->path == want) return checked(f);
  }
  const std::string w = lower(want);
  std::vector<const RemoteFile*> exact, partial;
  for (const RemoteFile* f : ggufs) {
    if (quant_of_file(f->path) == w) exact.push_back(f);
    if (lower(basename_of(f->path)).find(w) != std::string::npos) partial.push_back(f);
  }
  const std::vector<const RemoteFile*>& hits = exact.empty() ? partial : exact;
  if (hits.size() == 1) return checked(hits[0]);
  if (hits.empty()) {
    return not_found("no GGUF file in " + repo + " matches '" + want +
                     "'; choices: " + choices(ggufs));
  }
  return invalid_argument("'" + want + "' matches " + std::to_string(hits.size()) +
                          " GGUF files in " + repo + "; name one exactly: " + choices(hits));
}

}  // namespace glm::hub
