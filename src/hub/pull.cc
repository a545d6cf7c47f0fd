#include "hub/pull.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "gguf/gguf.h"
#include "hub/file_type.h"

namespace glm::hub {

namespace {

constexpr int kMaxTreePages = 1000;
constexpr int kTreeAttempts = 4;

std::string where(const RepoRef& ref) {
  return ref.repo + " (revision " + ref.revision + ") at " + ref.endpoint;
}

// One page of the tree answer: body and next-page link, or an error saying what to do.
Status fetch_page(HttpClient* http, const RepoRef& ref, const std::string& url, std::string* body,
                  std::string* next) {
  body->clear();
  bool too_big = false;
  const HttpResponse r = http->get(url, 0, [&](const HttpResponse&, const char* data, size_t n) {
    if (body->size() + n > kMaxTreeBytes) {
      too_big = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  if (too_big) {
    return bad_file("the file list of " + where(ref) + " is over " +
                    std::to_string(kMaxTreeBytes >> 20) + " MiB: refused");
  }
  if (r.status == 404) {
    return not_found("repository " + where(ref) +
                     " not found (check the name and --revision; a private or gated repository "
                     "needs HF_TOKEN)");
  }
  if (r.status == 401 || r.status == 403) {
    return Status(ErrorCode::kUnauthorized,
                  "repository " + where(ref) + " answered HTTP " + std::to_string(r.status) +
                      ": it is private or gated (set HF_TOKEN to a token with access)");
  }
  if (!r.transport_error.empty()) {
    return Status(ErrorCode::kUnavailable, "cannot read the file list of " + where(ref) + ": " +
                                               r.transport_error +
                                               " (check the network, or --endpoint / HF_ENDPOINT)");
  }
  if (r.status != 200) {
    std::string msg = r.error_body.substr(0, 200);
    for (char& c : msg) c = (c == '\n' || c == '\r') ? ' ' : c;
    return Status(ErrorCode::kUnavailable, "the file list of " + where(ref) + " answered HTTP " +
                                               std::to_string(r.status) +
                                               (msg.empty() ? "" : ": " + msg));
  }
  *next = r.link_next;
  return Status::Ok();
}

bool file_size_is(const std::string& path, uint64_t size) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == size;
}

// --name over the derived name.
Status apply_name(const std::string& flag, ModelName* name) {
  if (flag.empty()) return Status::Ok();
  std::optional<ModelName> n = parse_model_name(flag);
  if (!n) {
    return invalid_argument("--name '" + flag +
                            "' is not a model name (BASE or BASE:TAG of a-z 0-9 . _ -)");
  }
  name->base = n->base;
  if (!n->tag.empty()) name->tag = n->tag;
  return Status::Ok();
}

// A name taken by a model from another repository is not overwritten.
Status check_owner(const std::optional<Manifest>& old, const RepoRef& ref, const ModelName& name) {
  if (old && !old->repo.empty() && old->repo != ref.repo) {
    return invalid_argument("the store already holds " + name.str() + " from " + old->repo +
                            " (remove it with glmserve rm " + name.str() +
                            ", or pick another name with --name)");
  }
  return Status::Ok();
}

// The tags a checkpoint may be stored under, before it is converted: a PEFT adapter's is "lora";
// a model's the conversion type, or "ptuning" when its config.json makes it a P-Tuning v2
// prefix (known once converted); --name's tag when given.
std::vector<std::string> candidate_tags(const PullOptions& o, const Checkpoint& ck) {
  std::optional<ModelName> n = o.name.empty() ? std::nullopt : parse_model_name(o.name);
  if (n && !n->tag.empty()) return {n->tag};
  if (ck.lora) return {"lora"};
  return {sanitize_name_part(o.convert_tag), "ptuning"};
}

// The checkpoint's files into DIR/.staging/..., then the caller's converter into the staging
// directory, then into the store under the name of what it made (a model, or an adapter).
StatusOr<PullResult> pull_checkpoint(const PullOptions& o, const RepoRef& ref, const Store& store,
                                     HttpClient* http, const Checkpoint& ck) {
  PullResult res;
  res.converted = true;
  res.file.path = "(HF checkpoint: " + std::to_string(ck.files.size()) + " files)";
  res.file.size = ck.bytes;
  const std::vector<std::string> tags = candidate_tags(o, ck);
  for (const std::string& tag : tags) {  // the same files converted before: up to date
    res.name = ModelName{base_name_for_repo(ref.repo), tag};
    if (Status s = apply_name(o.name, &res.name); !s.ok()) return s;
    res.path = store.model_path(res.name);
    const std::optional<Manifest> old = store.read_manifest(res.name);
    if (old && old->repo == ref.repo && old->sha256 == ck.fingerprint &&
        file_size_is(res.path, old->size)) {
      res.already_present = true;
      return res;
    }
  }
  if (tags.size() == 1) {  // the name is known: a name taken by another repository stops it now
    if (Status s = check_owner(store.read_manifest(res.name), ref, res.name); !s.ok()) return s;
  }
  // DIR/.staging/BASE-REV/NAME: the last part is the repository's own name (checked by
  // make_repo_ref), which the converter takes as the model's general.name when config.json
  // has no _name_or_path, as for a clone of the repository.
  const size_t slash = ref.repo.rfind('/');
  const std::string staging =
      store.dir() + "/.staging/" + res.name.base + "-" + sanitize_name_part(ref.revision);
  res.checkpoint_dir =
      staging + "/" + (slash == std::string::npos ? ref.repo : ref.repo.substr(slash + 1));
  std::error_code ec;
  std::filesystem::create_directories(res.checkpoint_dir, ec);
  if (ec) {
    return Status(ErrorCode::kInternal,
                  "cannot create '" + res.checkpoint_dir + "': " + ec.message());
  }
  if (o.note) {
    o.note(std::string("downloading the ") + (ck.lora ? "PEFT LoRA adapter " : "HF checkpoint ") +
           ref.repo + " (" + std::to_string(ck.files.size()) + " files, " +
           std::to_string(ck.bytes / 1000000) + " MB) to convert it");
  }
  uint64_t before = 0;  // bytes of the files already done, for one progress over all
  for (const RemoteFile& f : ck.files) {
    const std::string dest = res.checkpoint_dir + "/" + f.path;  // a top-level, checked name
    if (!file_size_is(dest, f.size)) {  // a file under its name was verified when it was placed
      DownloadOptions dl = o.download;
      dl.progress = [&](uint64_t done, uint64_t) {
        if (o.download.progress) o.download.progress(before + done, ck.bytes);
      };
      StatusOr<DownloadResult> got = download_file(http, resolve_url(ref, f.path), f, dest, dl);
      if (!got.ok()) return got.status();
      res.download.bytes_fetched += got->bytes_fetched;
      res.download.resumed_from += got->resumed_from;
      res.download.attempts += got->attempts;
    }
    before += f.size;
  }
  if (o.note) o.note("converting " + ref.repo);
  const std::string converted = staging + "/converted.gguf";
  if (Status s = o.convert(res.checkpoint_dir, converted); !s.ok()) return s;
  {  // the name of what it made: an adapter under its kind, a model under the conversion type
    StatusOr<std::unique_ptr<gguf::File>> g = gguf::File::open(converted);
    if (!g.ok()) return g.status();
    res.adapter = adapter_kind(**g);
  }
  res.name = ModelName{base_name_for_repo(ref.repo),
                       res.adapter.empty() ? sanitize_name_part(o.convert_tag) : res.adapter};
  if (Status s = apply_name(o.name, &res.name); !s.ok()) return s;
  res.path = store.model_path(res.name);
  if (Status s = check_owner(store.read_manifest(res.name), ref, res.name); !s.ok()) return s;
  if (Status s = store.make_dirs(res.name); !s.ok()) return s;
  Manifest m{ref.endpoint, ref.repo, ref.revision, "", ck.fingerprint, 0};
  struct stat st {};
  if (::stat(converted.c_str(), &st) == 0) m.size = static_cast<uint64_t>(st.st_size);
  if (Status s = store.write_manifest(res.name, m); !s.ok()) return s;
  std::filesystem::rename(converted, res.path, ec);  // the same file system: the store's
  if (ec) {
    return Status(ErrorCode::kInternal,
                  "cannot move the converted file to '" + res.path + "': " + ec.message());
  }
  if (!o.keep_checkpoint) {
    std::filesystem::remove_all(staging, ec);
  }
  return res;
}

}  // namespace

StatusOr<std::vector<RemoteFile>> fetch_tree(HttpClient* http, const RepoRef& ref,
                                             const DownloadOptions& retry) {
  std::vector<RemoteFile> files;
  std::string url = tree_url(ref);
  for (int page = 0; !url.empty(); ++page) {
    if (page >= kMaxTreePages) {
      return bad_file("the file list of " + where(ref) + " has over " +
                      std::to_string(kMaxTreePages) + " pages: refused");
    }
    std::string body, next;
    Status s;
    int64_t wait = retry.backoff_ms;
    for (int attempt = 1;; ++attempt, wait *= 2) {
      s = fetch_page(http, ref, url, &body, &next);
      if (s.ok() || s.code() != ErrorCode::kUnavailable || attempt >= kTreeAttempts) break;
      if (retry.note) retry.note(s.message() + "; retrying in " + std::to_string(wait) + " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    }
    if (!s.ok()) return s;
    StatusOr<std::vector<RemoteFile>> part = parse_tree(body, "the file list of " + where(ref));
    if (!part.ok()) return part.status();
    if (files.size() + part->size() > kMaxTreeEntries) {
      return bad_file("the file list of " + where(ref) + " has too many entries: refused");
    }
    for (RemoteFile& f : *part) files.push_back(std::move(f));
    // The next page must come from the same hub: a Link elsewhere is not followed.
    if (!next.empty() && next.rfind(ref.endpoint + "/", 0) != 0) {
      return bad_file("the file list of " + where(ref) + " links its next page outside " +
                      ref.endpoint + ": refused");
    }
    url = next;
  }
  return files;
}

StatusOr<PullResult> pull(const PullOptions& o) {
  StatusOr<RepoRef> ref = make_repo_ref(o.repo, o.revision, o.endpoint, std::getenv("HF_ENDPOINT"));
  if (!ref.ok()) return ref.status();
  StatusOr<std::string> dir = store_dir(o.models_dir);
  if (!dir.ok()) return dir.status();
  Store store(*dir);
  ModelName probe;  // a bad --name is reported before any network traffic
  if (Status s = apply_name(o.name, &probe); !s.ok()) return s;

  HttpOptions http_options;
  http_options.bearer_token = o.token;
  http_options.cancel = o.download.cancel;
  HttpClient http(http_options);
  StatusOr<std::vector<RemoteFile>> files = fetch_tree(&http, *ref, o.download);
  if (!files.ok()) return files.status();
  const bool any_gguf = std::any_of(files->begin(), files->end(),
                                    [](const RemoteFile& f) { return is_gguf(f.path); });
  if (!any_gguf && o.convert) {
    if (std::optional<Checkpoint> ck = find_checkpoint(*files)) {
      if (!o.want.empty()) {
        return invalid_argument(
            ref->repo + (ck->lora ? " is a PEFT LoRA adapter" : " is an HF checkpoint") +
            ", not GGUF files: drop '" + o.want + "' (the weight type is --type)");
      }
      return pull_checkpoint(o, *ref, store, &http, *ck);
    }
  }
  StatusOr<RemoteFile> file = select_gguf(*files, o.want, ref->repo);
  if (!file.ok()) return file.status();

  PullResult res;
  res.file = *file;
  res.name = ModelName{base_name_for_repo(ref->repo), tag_for_file(file->path)};
  if (Status s = apply_name(o.name, &res.name); !s.ok()) return s;
  res.path = store.model_path(res.name);
  const std::optional<Manifest> old = store.read_manifest(res.name);
  if (Status s = check_owner(old, *ref, res.name); !s.ok()) return s;
  if (old && old->sha256 == file->sha256 && old->size == file->size &&
      file_size_is(res.path, file->size) && !file_size_is(res.path + ".part", file->size)) {
    res.already_present = true;
    return res;
  }
  if (Status s = store.make_dirs(res.name); !s.ok()) return s;

  Manifest m{ref->endpoint, ref->repo, ref->revision, file->path, file->sha256, file->size};
  DownloadOptions dl = o.download;
  dl.before_place = [&](const std::string& part) -> Status {
    StatusOr<std::unique_ptr<gguf::File>> g = gguf::File::open(part);
    if (!g.ok()) {
      return bad_file(file->path + " from " + ref->repo + " is not a usable GGUF file (" +
                      g.status().message() + "); discarded");
    }
    return store.write_manifest(res.name, m);
  };
  if (o.note) {
    char size[32];
    std::snprintf(size, sizeof(size), "%.1f MB", static_cast<double>(file->size) / 1e6);
    o.note("downloading " + file->path + " (" + size + ") from " + ref->repo + " as " +
           res.name.str());
  }
  StatusOr<DownloadResult> got =
      download_file(&http, resolve_url(*ref, file->path), *file, res.path, dl);
  if (!got.ok()) return got.status();
  res.download = *got;
  return res;
}

}  // namespace glm::hub
