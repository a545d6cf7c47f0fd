// Test helper (not part of the library): writes PyTorch checkpoints in torch.save's zip layout,
// byte for byte the way torch.save (torch/serialization.py `_save`, pickle protocol 2) and
// CPython's pickle.Pickler lay them out, so that the reader is tested against the real shape:
//   data.pkl: PROTO 2; GLOBAL collections.OrderedDict, EMPTY_TUPLE, REDUCE (or EMPTY_DICT for the
//   plain dict of an HF shard); MARK, then per tensor its name and
//     GLOBAL torch._utils._rebuild_tensor_v2, MARK,
//       MARK 'storage' GLOBAL torch.<T>Storage '<key>' 'cpu' numel TUPLE, BINPERSID,
//       offset, size tuple, stride tuple, NEWFALSE, OrderedDict() (backward hooks),
//     TUPLE, REDUCE;
//   SETITEMS (batches of 1000), then the `_metadata` attribute state_dict() sets, and BUILD.
//   Every str, global and non-empty tuple is memoized (BINPUT) on first use and fetched again
//   with BINGET when the same object recurs ('storage', 'cpu', a shared storage's key).
// Zip: records <archive>/data.pkl, byteorder, data/<key> (stored, data 64-byte aligned by an
// "FB" padding extra field, as PyTorchStreamWriter does), version; optional deflate and forced
// ZIP64 records exercise the other paths of the reader.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/unpickle.h"

namespace glm::checkpoint::testing {

// CPython pickle protocol 2 writer with pickle.Pickler's memo behaviour.
class PickleWriter {
 public:
  PickleWriter() { b_ += "\x80\x02"; }
  std::string& bytes() { return b_; }
  void op(uint8_t c) { b_.push_back(static_cast<char>(c)); }
  void mark() { op('('); }
  // A str; `same_object` strings (literals, shared keys) are fetched from the memo on reuse.
  void str(const std::string& s, bool same_object) {
    if (same_object) {
      auto it = str_memo_.find(s);
      if (it != str_memo_.end()) return get(it->second);
    }
    op('X');
    u32(static_cast<uint32_t>(s.size()));
    b_ += s;
    const uint32_t m = put();
    if (same_object) str_memo_[s] = m;
  }
  void global(const std::string& module, const std::string& name) {
    const std::string k = module + "\n" + name + "\n";
    auto it = global_memo_.find(k);
    if (it != global_memo_.end()) return get(it->second);
    op('c');
    b_ += k;
    global_memo_[k] = put();
  }
  // pickle.Pickler.save_long for protocol 2.
  void integer(int64_t v) {
    if (v >= 0 && v <= 0xff) {
      op('K');
      op(static_cast<uint8_t>(v));
    } else if (v >= 0 && v <= 0xffff) {
      op('M');
      op(static_cast<uint8_t>(v));
      op(static_cast<uint8_t>(v >> 8));
    } else if (v >= -0x80000000LL && v <= 0x7fffffffLL) {
      op('J');
      u32(static_cast<uint32_t>(v));
    } else {  // LONG1: minimal two's complement, little-endian
      std::string enc;
      int64_t x = v;
      do {
        enc.push_back(static_cast<char>(x & 0xff));
        x >>= 8;
      } while (!((x == 0 && !(enc.back() & 0x80)) || (x == -1 && (enc.back() & 0x80))));
      op(0x8a);
      op(static_cast<uint8_t>(enc.size()));
      b_ += enc;
    }
  }
  // save_tuple for a tuple of ints: TUPLE1/2/3 or MARK..TUPLE, then memoized; () is not.
  void int_tuple(const std::vector<int64_t>& v) {
    if (v.empty()) return op(')');
    if (v.size() > 3) mark();
    for (int64_t x : v) integer(x);
    op(v.size() > 3 ? 't' : static_cast<uint8_t>(0x85 + v.size() - 1));
    put();
  }
  uint32_t put() {
    const uint32_t m = n_memo_++;
    if (m < 256) {
      op('q');
      op(static_cast<uint8_t>(m));
    } else {
      op('r');
      u32(m);
    }
    return m;
  }
  void get(uint32_t m) {
    if (m < 256) {
      op('h');
      op(static_cast<uint8_t>(m));
    } else {
      op('j');
      u32(m);
    }
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) op(static_cast<uint8_t>(v >> (8 * i)));
  }

 private:
  std::string b_;
  uint32_t n_memo_ = 0;
  std::map<std::string, uint32_t> str_memo_;
  std::map<std::string, uint32_t> global_memo_;
};

// A storage and the views on it that go into a checkpoint.
struct TorchStorageOut {
  std::string dtype;  // "F16", "BF16", "F32", ...
  std::vector<uint8_t> bytes;
};
struct TorchViewOut {
  std::string name;
  size_t storage = 0;  // index into the storages
  int64_t offset = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // empty: contiguous
};

struct TorchZipOptions {
  std::string archive = "archive";  // torch.save(obj, "x/pytorch_model.bin") uses "pytorch_model"
  bool ordered_dict = true;         // state_dict(): OrderedDict with _metadata; false: plain dict
  bool byteorder = true;            // torch >= 2.1 writes <archive>/byteorder
  std::string byteorder_value = "little";
  bool deflate = false;  // deflate the storages (torch never does; other zip tools may)
  bool zip64 = false;    // ZIP64 central directory and end records even though nothing needs them
};

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t n = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    s[k] = n;
    n *= shape[k];
  }
  return s;
}

// data.pkl for the views (storage keys "0", "1", ... in storage order).
inline std::string torch_state_dict_pickle(const std::vector<TorchStorageOut>& storages,
                                           const std::vector<TorchViewOut>& views,
                                           bool ordered_dict) {
  PickleWriter w;
  if (ordered_dict) {
    w.global("collections", "OrderedDict");
    w.op(')');
    w.op('R');
    w.put();
  } else {
    w.op('}');
    w.put();
  }
  for (size_t i = 0; i < views.size(); ++i) {
    if (i % 1000 == 0 && views.size() - i > 1) w.mark();
    const TorchViewOut& v = views[i];
    const TorchStorageOut& s = storages[v.storage];
    const size_t esize = st_dtype_size(s.dtype);
    w.str(v.name, false);
    w.global("torch._utils", "_rebuild_tensor_v2");
    w.mark();
    w.mark();
    w.str("storage", true);
    w.global("torch", torch_storage_name(s.dtype));
    w.str(std::to_string(v.storage), true);
    w.str("cpu", true);
    w.integer(static_cast<int64_t>(s.bytes.size() / esize));
    w.op('t');
    w.put();
    w.op('Q');
    w.integer(v.offset);
    w.int_tuple(v.shape);
    w.int_tuple(v.stride.empty() ? contiguous_strides(v.shape) : v.stride);
    w.op(0x89);  // NEWFALSE: requires_grad
    w.global("collections", "OrderedDict");
    w.op(')');
    w.op('R');
    w.put();  // backward_hooks = OrderedDict()
    w.op('t');
    w.put();
    w.op('R');
    w.put();
    const bool batch_end = (i + 1) % 1000 == 0 || i + 1 == views.size();
    const bool single = (i % 1000 == 0) && batch_end;
    if (batch_end) w.op(single ? 's' : 'u');
  }
  if (ordered_dict) {
    // state: {'_metadata': OrderedDict([('', {'version': 1}), ('transformer', {'version': 1})])}
    w.op('}');
    w.put();
    w.str("_metadata", false);
    w.global("collections", "OrderedDict");
    w.op(')');
    w.op('R');
    w.put();
    w.mark();
    for (const char* prefix : {"", "transformer"}) {
      w.str(prefix, false);
      w.op('}');
      w.put();
      w.str("version", true);
      w.integer(1);
      w.op('s');
    }
    w.op('u');
    w.op('s');
    w.op('b');  // BUILD
  }
  w.op('.');
  return w.bytes();
}

// A zip archive in PyTorchStreamWriter's layout from (name, bytes) records.
inline std::string torch_zip_bytes(const std::vector<std::pair<std::string, std::string>>& records,
                                   const TorchZipOptions& o, bool deflate_storages) {
  std::string out;
  auto u16 = [](std::string* s, uint32_t v) {
    s->push_back(static_cast<char>(v & 0xff));
    s->push_back(static_cast<char>((v >> 8) & 0xff));
  };
  auto u32 = [&](std::string* s, uint32_t v) {
    u16(s, v & 0xffff);
    u16(s, v >> 16);
  };
  auto u64 = [&](std::string* s, uint64_t v) {
    u32(s, static_cast<uint32_t>(v));
    u32(s, static_cast<uint32_t>(v >> 32));
  };
  struct Cd {
    std::string name;
    uint32_t crc, method;
    uint64_t size, csize, offset;
  };
  std::vector<Cd> cd;
  for (const auto& [rel, data] : records) {
    const std::string name = o.archive + "/" + rel;
    const bool compress = deflate_storages && rel.rfind("data/", 0) == 0;
    std::string payload = data;
    if (compress) {
      z_stream z{};
      deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
      payload.resize(deflateBound(&z, data.size()));
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
      z.avail_in = static_cast<uInt>(data.size());
      z.next_out = reinterpret_cast<Bytef*>(payload.data());
      z.avail_out = static_cast<uInt>(payload.size());
      deflate(&z, Z_FINISH);
      payload.resize(z.total_out);
      deflateEnd(&z);
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    Cd e{name, crc, compress ? 8u : 0u, data.size(), payload.size(), out.size()};
    // Local header; the "FB" extra field pads the data to a multiple of 64 bytes.
    const size_t base = out.size() + 30 + name.size() + 4;
    const size_t pad = (64 - base % 64) % 64;
    u32(&out, 0x04034b50);
    u16(&out, o.zip64 ? 45 : 20);
    u16(&out, 0);  // flags
    u16(&out, e.method);
    u16(&out, 0);     // time
    u16(&out, 0x21);  // date: 1980-01-01
    u32(&out, crc);
    u32(&out, static_cast<uint32_t>(e.csize));
    u32(&out, static_cast<uint32_t>(e.size));
    u16(&out, static_cast<uint32_t>(name.size()));
    u16(&out, static_cast<uint32_t>(4 + pad));
    out += name;
    out += "FB";
    u16(&out, static_cast<uint32_t>(pad));
    out += std::string(pad, 'Z');
    out += payload;
    cd.push_back(e);
  }
  const uint64_t cd_start = out.size();
  for (const Cd& e : cd) {
    u32(&out, 0x02014b50);
    u16(&out, o.zip64 ? 45 : 20);
    u16(&out, o.zip64 ? 45 : 20);
    u16(&out, 0);
    u16(&out, e.method);
    u16(&out, 0);
    u16(&out, 0x21);
    u32(&out, e.crc);
    u32(&out, o.zip64 ? 0xffffffffu : static_cast<uint32_t>(e.csize));
    u32(&out, o.zip64 ? 0xffffffffu : static_cast<uint32_t>(e.size));
    u16(&out, static_cast<uint32_t>(e.name.size()));
    u16(&out, o.zip64 ? 28 : 0);  // extra
    u16(&out, 0);                 // comment
    u16(&out, 0);                 // disk
    u16(&out, 0);                 // internal attributes
    u32(&out, 0);                 // external attributes
    u32(&out, o.zip64 ? 0xffffffffu : static_cast<uint32_t>(e.offset));
    out += e.name;
    if (o.zip64) {  // ZIP64 extended information: sizes and offset in 64 bits
      u16(&out, 0x0001);
      u16(&out, 24);
      u64(&out, e.size);
      u64(&out, e.csize);
      u64(&out, e.offset);
    }
  }
  const uint64_t cd_size = out.size() - cd_start;
  if (o.zip64) {
    const uint64_t eocd64 = out.size();
    u32(&out, 0x06064b50);
    u64(&out, 44);
    u16(&out, 45);
    u16(&out, 45);
    u32(&out, 0);
    u32(&out, 0);
    u64(&out, cd.size());
    u64(&out, cd.size());
    u64(&out, cd_size);
    u64(&out, cd_start);
    u32(&out, 0x07064b50);  // locator
    u32(&out, 0);
    u64(&out, eocd64);
    u32(&out, 1);
  }
  u32(&out, 0x06054b50);
  u16(&out, 0);
  u16(&out, 0);
  u16(&out, o.zip64 ? 0xffff : static_cast<uint32_t>(cd.size()));
  u16(&out, o.zip64 ? 0xffff : static_cast<uint32_t>(cd.size()));
  u32(&out, o.zip64 ? 0xffffffffu : static_cast<uint32_t>(cd_size));
  u32(&out, o.zip64 ? 0xffffffffu : static_cast<uint32_t>(cd_start));
  u16(&out, 0);
  return out;
}

// The whole checkpoint file image: data.pkl, byteorder, the storages, version.
inline std::string torch_checkpoint_bytes(const std::vector<TorchStorageOut>& storages,
                                          const std::vector<TorchViewOut>& views,
                                          const TorchZipOptions& o) {
  std::vector<std::pair<std::string, std::string>> records;
  records.emplace_back("data.pkl", torch_state_dict_pickle(storages, views, o.ordered_dict));
  if (o.byteorder) records.emplace_back("byteorder", o.byteorder_value);
  for (size_t k = 0; k < storages.size(); ++k) {
    records.emplace_back("data/" + std::to_string(k),
                         std::string(storages[k].bytes.begin(), storages[k].bytes.end()));
  }
  records.emplace_back("version", "3\n");
  return torch_zip_bytes(records, o, o.deflate);
}

inline bool write_file(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return (std::fclose(f) == 0) && ok;
}

// A state dict of contiguous tensors, each on its own storage: the .bin twin of
// write_safetensors().
inline bool write_torch_checkpoint(const std::string& path, const std::vector<StTensorOut>& ts,
                                   const TorchZipOptions& o = {}) {
  std::vector<TorchStorageOut> storages;
  std::vector<TorchViewOut> views;
  for (const StTensorOut& t : ts) {
    storages.push_back({t.dtype, t.data});
    views.push_back({t.name, storages.size() - 1, 0, t.shape, {}});
  }
  return write_file(path, torch_checkpoint_bytes(storages, views, o));
}

}  // namespace glm::checkpoint::testing
