#include "checkpoint/torch_zip.h"

#include <cstring>
#include <map>

#include "checkpoint/printable.h"
#include "checkpoint/unpickle.h"
#include "checkpoint/zip_archive.h"

namespace glm::checkpoint {

namespace {

// A legacy file starts with the pickled magic number 0x1950a86a20f9469cfc6c:
// PROTO 2, LONG1 of 10 bytes, little-endian.
constexpr uint8_t kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                    0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

// Copies the strided view `t` of `storage` (elements of `esize` bytes) into `out`, row-major.
void gather(const PickledTensor& t, const uint8_t* storage, size_t esize, uint8_t* out) {
  const size_t nd = t.shape.size();
  const int64_t n = t.n_elements();
  std::vector<int64_t> idx(nd, 0);
  int64_t src = t.offset;
  for (int64_t e = 0; e < n; ++e) {
    std::memcpy(out + static_cast<size_t>(e) * esize, storage + static_cast<size_t>(src) * esize,
                esize);
    // Advance the multi-index, last dimension fastest.
    for (size_t k = nd; k-- > 0;) {
      if (++idx[k] < t.shape[k]) {
        src += t.stride[k];
        break;
      }
      src -= (t.shape[k] - 1) * t.stride[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

bool is_legacy_torch_file(const uint8_t* data, size_t size) {
  if (size >= sizeof(kLegacyMagic) && std::memcmp(data, kLegacyMagic, sizeof(kLegacyMagic)) == 0) {
    return true;
  }
  // The even older tar layout (torch < 0.4): "ustar" at offset 257.
  return size >= 262 && std::memcmp(data + 257, "ustar", 5) == 0;
}

StatusOr<std::unique_ptr<TorchZipFile>> TorchZipFile::open(const std::string& path) {
  StatusOr<MappedFile> m = MappedFile::open(path);
  if (!m.ok()) return m.status();
  StatusOr<std::unique_ptr<TorchZipFile>> f = parse(m->data(), m->size(), path);
  if (!f.ok()) return f.status();
  (*f)->map_ = std::move(*m);
  return f;
}

StatusOr<std::unique_ptr<TorchZipFile>> TorchZipFile::parse(const uint8_t* data, size_t size,
                                                            const std::string& label) {
  auto bad = [&](const std::string& m) { return bad_file(label + ": " + m); };
  if (size >= sizeof(kLegacyMagic) && std::memcmp(data, kLegacyMagic, sizeof(kLegacyMagic)) == 0) {
    return parse_legacy(data, size, label);
  }
  if (is_legacy_torch_file(data, size)) {
    return unsupported(label +
                       ": legacy torch format (torch < 0.4, a tar archive): re-save with "
                       "torch>=1.6, e.g. torch.save(torch.load(f), f), or save safetensors");
  }
  if (size < 4 || std::memcmp(data, "PK\x03\x04", 4) != 0) {
    return bad("not a PyTorch checkpoint (torch.save writes a zip archive; this is not one)");
  }
  StatusOr<std::unique_ptr<ZipArchive>> zip = ZipArchive::parse(data, size, label);
  if (!zip.ok()) return zip.status();

  // The one <archive>/data.pkl names the folder everything else is under.
  std::string prefix;
  int n_pkl = 0;
  for (const ZipEntry& e : (*zip)->entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefix = e.name.substr(0, slash + 1);
      ++n_pkl;
    }
  }
  if (n_pkl != 1) {
    const bool script = !(*zip)->entries().empty() &&
                        (*zip)->entries()[0].name.find("constants.pkl") != std::string::npos;
    return bad(n_pkl == 0 ? std::string("no <archive>/data.pkl: not a torch.save checkpoint") +
                                (script ? " (a TorchScript archive?)" : "")
                          : "several <archive>/data.pkl records");
  }
  std::vector<uint8_t> buf;
  const uint8_t* bytes = nullptr;
  if (const ZipEntry* bo = (*zip)->find(prefix + "byteorder")) {
    GLM_RETURN_IF_ERROR((*zip)->read(*bo, &buf, &bytes));
    const std::string order(reinterpret_cast<const char*>(bytes), static_cast<size_t>(bo->size));
    if (order == "big") {
      return unsupported(label +
                         ": a big-endian checkpoint (re-save it on a little-endian "
                         "machine, or as safetensors)");
    }
    if (order != "little") return bad("byteorder record is \"" + printable(order) + "\"");
  }
  const ZipEntry& pkl = *(*zip)->find(prefix + "data.pkl");
  GLM_RETURN_IF_ERROR((*zip)->read(pkl, &buf, &bytes));
  StatusOr<std::vector<PickledTensor>> views =
      unpickle_state_dict(bytes, static_cast<size_t>(pkl.size), label + ": " + printable(pkl.name));
  if (!views.ok()) return views.status();

  auto out = std::unique_ptr<TorchZipFile>(new TorchZipFile());
  out->label_ = label;
  ZipArchive* z = zip->get();
  GLM_RETURN_IF_ERROR(
      out->add_tensors(*views, [&](const PickledTensor& v, const uint8_t** p) -> Status {
        const std::string rec = prefix + "data/" + v.storage_key;
        const ZipEntry* e = z->find(rec);
        if (e == nullptr) {
          return bad("tensor " + printable(v.name) + ": storage record " + printable(rec) +
                     " is missing");
        }
        const size_t esize = st_dtype_size(v.dtype);
        if (e->size != static_cast<uint64_t>(v.storage_numel) * esize) {
          return bad("storage record " + printable(rec) + " holds " + std::to_string(e->size) +
                     " bytes, not the " + std::to_string(v.storage_numel) + " x " +
                     std::to_string(esize) + " its tensors need");
        }
        std::vector<uint8_t> inflated;
        GLM_RETURN_IF_ERROR(z->read(*e, &inflated, p));
        if (!inflated.empty()) out->owned_.push_back(std::move(inflated));  // buffer moves intact
        return Status::Ok();
      }));
  return out;
}

// torch < 1.6 (`_legacy_save`): five pickles back to back, then the storages.
//   magic number 0x1950a86a20f9469cfc6c, protocol version 1001,
//   sys_info {protocol_version, little_endian, type_sizes}, the state dict (persistent ids of six
//   fields), the list of storage keys; then per key, in that order: int64 numel, the bytes.
StatusOr<std::unique_ptr<TorchZipFile>> TorchZipFile::parse_legacy(const uint8_t* data, size_t size,
                                                                   const std::string& label) {
  auto bad = [&](const std::string& m) { return bad_file(label + ": " + m); };
  size_t pos = sizeof(kLegacyMagic) + 1;  // ... and its STOP
  if (size < pos || data[pos - 1] != '.') return bad("truncated legacy header");
  size_t end = 0;
  StatusOr<nlohmann::json> version = unpickle_plain(data + pos, size - pos, label, &end);
  if (!version.ok()) return version.status();
  if (*version != 1001) {
    const std::string v =
        version->is_number_integer() ? std::to_string(version->get<int64_t>()) : "not a number";
    return unsupported(label + ": legacy torch format version " + v +
                       " (only 1001 is read): re-save with torch>=1.6");
  }
  pos += end;
  StatusOr<nlohmann::json> info = unpickle_plain(data + pos, size - pos, label, &end);
  if (!info.ok()) return info.status();
  const auto little = info->is_object() ? info->find("little_endian") : info->end();
  if (little == info->end() || !little->is_boolean() || !little->get<bool>()) {
    return unsupported(label +
                       ": a big-endian legacy checkpoint (re-save it with torch>=1.6 "
                       "on a little-endian machine)");
  }
  pos += end;
  StatusOr<std::vector<PickledTensor>> views =
      unpickle_state_dict(data + pos, size - pos, label, /*legacy=*/true, &end);
  if (!views.ok()) return views.status();
  pos += end;
  StatusOr<nlohmann::json> keys = unpickle_plain(data + pos, size - pos, label, &end);
  if (!keys.ok()) return keys.status();
  if (!keys->is_array()) return bad("no list of storage keys after the state dict");
  pos += end;
  // Where each storage lies: the views tell each key's element size and numel.
  std::map<std::string, const PickledTensor*> user;
  for (const PickledTensor& v : *views) user.emplace(v.storage_key, &v);
  std::map<std::string, const uint8_t*> at;
  for (const nlohmann::json& k : *keys) {
    if (!k.is_string()) return bad("a storage key is not a str");
    auto it = user.find(k.get<std::string>());
    if (it == user.end()) {
      return bad("storage " + printable(k.get<std::string>()) +
                 " belongs to no tensor of the state dict (cannot size it)");
    }
    const PickledTensor& v = *it->second;
    const uint64_t n = static_cast<uint64_t>(v.storage_numel) * st_dtype_size(v.dtype);
    if (size - pos < 8 || size - pos - 8 < n) return bad("truncated storage data");
    int64_t numel = 0;
    std::memcpy(&numel, data + pos, 8);  // little-endian, as sys_info said
    if (numel != v.storage_numel) {
      return bad("storage " + printable(v.storage_key) + " holds " + std::to_string(numel) +
                 " elements, not the " + std::to_string(v.storage_numel) + " its tensors name");
    }
    at[v.storage_key] = data + pos + 8;
    pos += 8 + static_cast<size_t>(n);
  }
  auto out = std::unique_ptr<TorchZipFile>(new TorchZipFile());
  out->label_ = label;
  GLM_RETURN_IF_ERROR(
      out->add_tensors(*views, [&](const PickledTensor& v, const uint8_t** p) -> Status {
        auto it = at.find(v.storage_key);
        if (it == at.end()) {
          return bad("tensor " + printable(v.name) + ": its storage's bytes are missing");
        }
        *p = it->second;
        return Status::Ok();
      }));
  return out;
}

Status TorchZipFile::add_tensors(const std::vector<PickledTensor>& views,
                                 const StorageFn& storage_of) {
  std::map<std::string, const uint8_t*> storages;  // key -> its bytes
  // Strided copies stay near what the storages themselves hold (a real checkpoint's views cover
  // their storage about once), so stride-0 "views" cannot ask for terabytes: each view at most
  // its storage's size, all of them at most twice the storages plus 16 MiB.
  uint64_t storage_bytes = 0;
  uint64_t gathered_bytes = 0;
  for (const PickledTensor& v : views) {
    const size_t esize = st_dtype_size(v.dtype);
    auto it = storages.find(v.storage_key);
    if (it == storages.end()) {
      const uint8_t* p = nullptr;
      GLM_RETURN_IF_ERROR(storage_of(v, &p));
      it = storages.emplace(v.storage_key, p).first;
      storage_bytes += static_cast<uint64_t>(v.storage_numel) * esize;
    }
    StTensor t;
    t.name = v.name;
    t.dtype = v.dtype;
    t.shape = v.shape;
    t.n_bytes = static_cast<size_t>(v.n_elements()) * esize;
    if (v.contiguous()) {
      t.data = it->second + static_cast<size_t>(v.offset) * esize;
    } else {
      gathered_bytes += t.n_bytes;
      if (v.n_elements() > v.storage_numel || gathered_bytes > 2 * storage_bytes + (16 << 20)) {
        return bad_file(label_ + ": tensor " + printable(v.name) +
                        ": strided views larger than their storages (re-save with .contiguous())");
      }
      std::vector<uint8_t> dense(t.n_bytes);
      gather(v, it->second, esize, dense.data());
      t.data = dense.data();
      owned_.push_back(std::move(dense));
    }
    tensors_.push_back(std::move(t));
  }
  return Status::Ok();
}

const StTensor* TorchZipFile::find(const std::string& name) const {
  for (const StTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

size_t TorchZipFile::n_copied_bytes() const {
  size_t n = 0;
  for (const std::vector<uint8_t>& b : owned_) n += b.size();
  return n;
}

}  // namespace glm::checkpoint
