#include "convert/unpickle.h"

#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "convert/printable.h"

namespace glm::convert {

namespace {

// Bounds on what a hostile pickle can make us hold. A real state dict needs ~15 objects and a
// few hundred bytes of pickle per tensor, far below these.
constexpr size_t kMaxObjects = size_t{1} << 22;
constexpr size_t kMaxStack = size_t{1} << 20;
constexpr size_t kMaxMemo = size_t{1} << 20;
constexpr size_t kMaxString = size_t{1} << 20;
constexpr size_t kMaxGlobalName = 256;
constexpr size_t kMaxDims = 16;
constexpr int64_t kMaxNumel = int64_t{1} << 50;

// Pickle opcodes (CPython Lib/pickletools.py names).
// clang-format off
enum Op : uint8_t {
  kMark = '(', kStop = '.', kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M', kNone = 'N',
  kBinPersId = 'Q', kReduce = 'R', kBinUnicode = 'X', kAppend = 'a', kBuild = 'b', kGlobal = 'c',
  kAppends = 'e', kBinGet = 'h', kLongBinGet = 'j', kEmptyList = ']', kBinPut = 'q',
  kLongBinPut = 'r', kSetItem = 's', kTuple = 't', kSetItems = 'u', kEmptyDict = '}',
  kEmptyTuple = ')', kBinFloat = 'G', kProto = 0x80, kTuple1 = 0x85, kTuple2 = 0x86,
  kTuple3 = 0x87, kNewTrue = 0x88, kNewFalse = 0x89, kLong1 = 0x8a, kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d, kStackGlobal = 0x93, kMemoize = 0x94, kFrame = 0x95,
};
// clang-format on

// Opcodes we refuse, named for the error message (CPython Lib/pickletools.py names).
struct OpName {
  uint8_t op;
  const char* name;
};
// clang-format off
constexpr OpName kRefusedOps[] = {
    {'I', "INT"}, {'L', "LONG"}, {'S', "STRING"}, {'V', "UNICODE"}, {'F', "FLOAT"}, {'i', "INST"},
    {'o', "OBJ"}, {'p', "PUT"}, {'g', "GET"}, {'l', "LIST"}, {'d', "DICT"}, {'P', "PERSID"},
    {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
    {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"},
    {0x84, "EXT4"}, {0x8b, "LONG4"}, {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"}, {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"}};
// clang-format on

const char* refused_opcode_name(uint8_t op) {
  for (const OpName& o : kRefusedOps) {
    if (o.op == op) return o.name;
  }
  return nullptr;
}

struct StorageClass {
  const char* name;
  const char* dtype;
};
constexpr StorageClass kStorageClasses[] = {{"HalfStorage", "F16"},  {"BFloat16Storage", "BF16"},
                                            {"FloatStorage", "F32"}, {"DoubleStorage", "F64"},
                                            {"LongStorage", "I64"},  {"IntStorage", "I32"},
                                            {"ShortStorage", "I16"}, {"CharStorage", "I8"},
                                            {"ByteStorage", "U8"},   {"BoolStorage", "BOOL"}};

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor
};
enum class Callable : uint8_t {
  kNotCallable,
  kOrderedDict,
  kRebuildTensorV2,
  kRebuildTensor,
  kRebuildParameter,
  kRebuildParameterWithState,
  kStorageClass
};

struct Obj {
  Kind kind = Kind::kNone;
  Callable callable = Callable::kNotCallable;  // kGlobal
  int64_t i = 0;                // kInt, kBool; kStorage/kTensor: index into storages_/tensors_
  double f = 0;                 // kFloat
  std::string s;                // kStr; kGlobal: "module.name"; storage class: its dtype in `dtype`
  std::string dtype;            // kGlobal of a storage class
  std::vector<uint32_t> items;  // kTuple/kList elements; kDict: k0, v0, k1, v1, ...
};

struct Storage {
  std::string key;
  std::string dtype;
  int64_t numel = 0;
};

struct TensorView {
  uint32_t storage = 0;  // index into storages_
  int64_t offset = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
};

const char* kind_name(Kind k) {
  static constexpr const char* kNames[] = {"None", "bool", "int",    "float",   "str",   "tuple",
                                           "list", "dict", "global", "storage", "tensor"};
  return kNames[static_cast<int>(k)];
}

// The pickle machine: a stack of object indices, a mark stack and a memo over an arena of
// objects (indices, not pointers, so a pickle that builds a cycle leaks nothing).
class Machine {
 public:
  Machine(const uint8_t* data, size_t size, const std::string& label, bool legacy = false)
      : p_(data), n_(size), label_(label), legacy_(legacy) {}

  Status run(uint32_t* result);
  size_t end() const { return pos_; }  // bytes consumed, STOP included
  // The plain data (None, bool, int, float, str, tuple, list, dict) under `idx` as JSON.
  Status to_json(uint32_t idx, int depth, nlohmann::json* out) const;
  const Obj& obj(uint32_t i) const { return objs_[i]; }
  const Storage& storage(int64_t i) const { return storages_[static_cast<size_t>(i)]; }
  const TensorView& tensor(int64_t i) const { return tensors_[static_cast<size_t>(i)]; }

 private:
  Status bad(const std::string& m) const {
    return bad_file(label_ + ": pickle byte " + std::to_string(op_at_) + ": " + m);
  }
  Status refuse(const std::string& m) const {
    return unsupported(label_ + ": pickle byte " + std::to_string(op_at_) + ": " + m);
  }
  bool take(size_t k, const uint8_t** out) {
    if (n_ - pos_ < k) return false;
    *out = p_ + pos_;
    pos_ += k;
    return true;
  }
  uint64_t le(const uint8_t* b, int k) const {
    uint64_t v = 0;
    for (int j = k - 1; j >= 0; --j) v = (v << 8) | b[j];
    return v;
  }
  Status new_obj(Obj o, uint32_t* idx) {
    if (objs_.size() >= kMaxObjects) return bad("more than 4M objects (not a state dict)");
    objs_.push_back(std::move(o));
    *idx = static_cast<uint32_t>(objs_.size() - 1);
    return Status::Ok();
  }
  Status push(uint32_t idx) {
    if (stack_.size() >= kMaxStack) return bad("stack deeper than 1M entries");
    stack_.push_back(idx);
    return Status::Ok();
  }
  Status push_new(Obj o) {
    uint32_t idx = 0;
    GLM_RETURN_IF_ERROR(new_obj(std::move(o), &idx));
    return push(idx);
  }
  Status pop(uint32_t* idx) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
      return bad("stack underflow (corrupt pickle)");
    }
    *idx = stack_.back();
    stack_.pop_back();
    return Status::Ok();
  }
  Status pop_mark(std::vector<uint32_t>* items) {
    if (marks_.empty()) return bad("no MARK on the stack (corrupt pickle)");
    const size_t m = marks_.back();
    marks_.pop_back();
    items->assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return Status::Ok();
  }
  Status memo_put(uint64_t key) {
    if (stack_.empty()) return bad("memo put with an empty stack");
    if (memo_.size() >= kMaxMemo && memo_.count(key) == 0) return bad("memo over 1M entries");
    memo_[key] = stack_.back();
    return Status::Ok();
  }
  Status memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return bad("memo key " + std::to_string(key) + " was never put");
    return push(it->second);
  }
  Status read_string(size_t len);
  Status read_line(std::string* out);
  Status global(const std::string& module, const std::string& name);
  Status reduce();
  Status persistent_id();
  Status int_of(uint32_t idx, const char* what, int64_t* out) const;
  Status int_tuple(uint32_t idx, const char* what, std::vector<int64_t>* out) const;
  Status rebuild_tensor(const std::vector<uint32_t>& args, bool v2);

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  size_t op_at_ = 0;
  const std::string& label_;
  const bool legacy_;
  std::vector<Obj> objs_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::vector<Storage> storages_;
  std::vector<TensorView> tensors_;
};

Status Machine::read_string(size_t len) {
  if (len > kMaxString) return bad("string of " + std::to_string(len) + " bytes (limit 1 MiB)");
  const uint8_t* b = nullptr;
  if (!take(len, &b)) return bad("truncated string");
  Obj o;
  o.kind = Kind::kStr;
  o.s.assign(reinterpret_cast<const char*>(b), len);
  return push_new(std::move(o));
}

Status Machine::read_line(std::string* out) {
  out->clear();
  while (pos_ < n_ && p_[pos_] != '\n') {
    if (out->size() >= kMaxGlobalName) return bad("GLOBAL name longer than 256 bytes");
    out->push_back(static_cast<char>(p_[pos_++]));
  }
  if (pos_ >= n_) return bad("truncated GLOBAL");
  ++pos_;  // the newline
  return Status::Ok();
}

Status Machine::global(const std::string& module, const std::string& name) {
  Obj o;
  o.kind = Kind::kGlobal;
  o.s = module + "." + name;
  if (module == "collections" && name == "OrderedDict") {
    o.callable = Callable::kOrderedDict;
  } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
    o.callable = Callable::kRebuildTensorV2;
  } else if (module == "torch._utils" && name == "_rebuild_tensor") {
    o.callable = Callable::kRebuildTensor;
  } else if (module == "torch._utils" && name == "_rebuild_parameter") {
    o.callable = Callable::kRebuildParameter;
  } else if (module == "torch._utils" && name == "_rebuild_parameter_with_state") {
    o.callable = Callable::kRebuildParameterWithState;
  } else if (module == "torch") {
    for (const StorageClass& c : kStorageClasses) {
      if (name == c.name) {
        o.callable = Callable::kStorageClass;
        o.dtype = c.dtype;
      }
    }
  }
  if (o.callable == Callable::kNotCallable) {
    return refuse("refusing global " + printable(o.s) +
                  ": a state dict names only collections.OrderedDict, "
                  "torch._utils._rebuild_tensor_v2 and torch.*Storage (this file holds more "
                  "than weights, or tries to run code; nothing was run)");
  }
  return push_new(std::move(o));
}

Status Machine::int_of(uint32_t idx, const char* what, int64_t* out) const {
  const Obj& o = objs_[idx];
  if (o.kind != Kind::kInt && o.kind != Kind::kBool) {
    return bad(std::string(what) + " must be an int, not " + kind_name(o.kind));
  }
  *out = o.i;
  return Status::Ok();
}

Status Machine::int_tuple(uint32_t idx, const char* what, std::vector<int64_t>* out) const {
  const Obj& o = objs_[idx];
  if (o.kind != Kind::kTuple && o.kind != Kind::kList) {
    return bad(std::string(what) + " must be a tuple, not " + kind_name(o.kind));
  }
  if (o.items.size() > kMaxDims) return bad(std::string(what) + " has more than 16 dimensions");
  out->clear();
  for (uint32_t k : o.items) {
    int64_t v = 0;
    GLM_RETURN_IF_ERROR(int_of(k, what, &v));
    if (v < 0 || v > kMaxNumel) return bad(std::string(what) + " holds " + std::to_string(v));
    out->push_back(v);
  }
  return Status::Ok();
}

Status Machine::rebuild_tensor(const std::vector<uint32_t>& a, bool v2) {
  const size_t need = v2 ? 6 : 4;
  if (a.size() != need && !(v2 && a.size() == 7)) {
    return bad(std::string(v2 ? "_rebuild_tensor_v2" : "_rebuild_tensor") + " takes " +
               std::to_string(need) + " arguments, got " + std::to_string(a.size()));
  }
  if (objs_[a[0]].kind != Kind::kStorage) {
    return bad("tensor built from a " + std::string(kind_name(objs_[a[0]].kind)) +
               ", not a storage");
  }
  TensorView t;
  t.storage = static_cast<uint32_t>(objs_[a[0]].i);
  GLM_RETURN_IF_ERROR(int_of(a[1], "storage_offset", &t.offset));
  GLM_RETURN_IF_ERROR(int_tuple(a[2], "size", &t.shape));
  GLM_RETURN_IF_ERROR(int_tuple(a[3], "stride", &t.stride));
  if (t.shape.size() != t.stride.size()) return bad("size and stride differ in length");
  if (t.offset < 0) return bad("negative storage_offset");
  // Every element must lie inside the storage: offset + sum (size - 1) * stride < numel.
  const int64_t numel = storages_[t.storage].numel;
  bool empty = false;
  int64_t n = 1;
  int64_t last = t.offset;
  for (size_t k = 0; k < t.shape.size(); ++k) {
    if (t.shape[k] == 0) empty = true;
    if (t.shape[k] != 0 && n > kMaxNumel / t.shape[k]) return bad("tensor too large");
    n *= t.shape[k];
    if (t.shape[k] > 1) {
      if (t.stride[k] > kMaxNumel / (t.shape[k] - 1)) return bad("stride too large");
      last += (t.shape[k] - 1) * t.stride[k];
      if (last > kMaxNumel) return bad("tensor view too large");
    }
  }
  if (empty ? t.offset > numel : last >= numel) {
    return bad("tensor view [offset " + std::to_string(t.offset) + "] reaches past its storage " +
               storages_[t.storage].key + " of " + std::to_string(numel) + " elements");
  }
  if (v2) {
    const Kind hooks = objs_[a[5]].kind;
    if (hooks != Kind::kDict && hooks != Kind::kNone) return bad("backward_hooks is not a dict");
  }
  tensors_.push_back(std::move(t));
  Obj o;
  o.kind = Kind::kTensor;
  o.i = static_cast<int64_t>(tensors_.size() - 1);
  return push_new(std::move(o));
}

Status Machine::reduce() {
  uint32_t args_idx = 0;
  uint32_t fn_idx = 0;
  GLM_RETURN_IF_ERROR(pop(&args_idx));
  GLM_RETURN_IF_ERROR(pop(&fn_idx));
  const Obj& fn = objs_[fn_idx];
  if (fn.kind != Kind::kGlobal) return bad(std::string("REDUCE on a ") + kind_name(fn.kind));
  if (objs_[args_idx].kind != Kind::kTuple) return bad("REDUCE arguments are not a tuple");
  const std::vector<uint32_t> args = objs_[args_idx].items;  // copy: objs_ may grow
  switch (fn.callable) {
    case Callable::kOrderedDict: {
      if (!args.empty()) return refuse("collections.OrderedDict called with arguments");
      Obj d;
      d.kind = Kind::kDict;
      return push_new(std::move(d));
    }
    case Callable::kRebuildTensorV2:
      return rebuild_tensor(args, true);
    case Callable::kRebuildTensor:
      return rebuild_tensor(args, false);
    case Callable::kRebuildParameter:
    case Callable::kRebuildParameterWithState: {
      const size_t need = fn.callable == Callable::kRebuildParameter ? 3 : 4;
      if (args.size() != need || objs_[args[0]].kind != Kind::kTensor) {
        return bad(printable(fn.s) + " takes a tensor and " + std::to_string(need - 1) +
                   " more arguments");
      }
      return push(args[0]);  // a Parameter is its data tensor, for us
    }
    case Callable::kStorageClass:
      return refuse("refusing to call " + printable(fn.s) +
                    ": a storage may appear only in a persistent id");
    case Callable::kNotCallable:
      break;
  }
  return refuse("refusing to call " + printable(fn.s));
}

Status Machine::persistent_id() {
  uint32_t pid_idx = 0;
  GLM_RETURN_IF_ERROR(pop(&pid_idx));
  const Obj& pid = objs_[pid_idx];
  const char* form = "a persistent id must be ('storage', torch.<T>Storage, key, location, numel)";
  // The legacy format adds a sixth field, view_metadata: None for a whole storage.
  const size_t fields = legacy_ ? 6 : 5;
  if (pid.kind != Kind::kTuple || pid.items.size() != fields) return bad(form);
  if (legacy_ && objs_[pid.items[5]].kind != Kind::kNone) {
    return refuse("a storage view (torch < 1.0 layout): re-save with torch>=1.6");
  }
  const Obj& tag = objs_[pid.items[0]];
  const Obj& cls = objs_[pid.items[1]];
  const Obj& key = objs_[pid.items[2]];
  const Obj& loc = objs_[pid.items[3]];
  if (tag.kind != Kind::kStr || tag.s != "storage" || cls.kind != Kind::kGlobal ||
      cls.callable != Callable::kStorageClass || key.kind != Kind::kStr || loc.kind != Kind::kStr) {
    return bad(form);
  }
  if (key.s.empty() || key.s.size() > 64) return bad("storage key of odd length");
  for (char c : key.s) {
    const bool ok =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!ok) return bad("storage key \"" + printable(key.s) + "\" is not alphanumeric");
  }
  Storage s;
  s.key = key.s;
  s.dtype = cls.dtype;
  GLM_RETURN_IF_ERROR(int_of(pid.items[4], "storage numel", &s.numel));
  if (s.numel < 0 || s.numel > kMaxNumel) return bad("storage numel out of range");
  storages_.push_back(std::move(s));
  Obj o;
  o.kind = Kind::kStorage;
  o.i = static_cast<int64_t>(storages_.size() - 1);
  return push_new(std::move(o));
}

Status Machine::run(uint32_t* result) {
  std::vector<uint32_t> items;
  while (true) {
    op_at_ = pos_;
    const uint8_t* b = nullptr;
    if (!take(1, &b)) return bad("truncated: no STOP opcode");
    const uint8_t op = *b;
    switch (op) {
      case kProto:
        if (!take(1, &b)) return bad("truncated PROTO");
        if (*b > 5) return refuse("pickle protocol " + std::to_string(*b) + " (at most 5)");
        break;
      case kFrame:
        if (!take(8, &b)) return bad("truncated FRAME");
        break;
      case kStop:
        if (stack_.empty()) return bad("STOP with an empty stack");
        *result = stack_.back();
        return Status::Ok();
      case kNone:
        GLM_RETURN_IF_ERROR(push_new(Obj{}));
        break;
      case kNewTrue:
      case kNewFalse: {
        Obj o;
        o.kind = Kind::kBool;
        o.i = op == kNewTrue;
        GLM_RETURN_IF_ERROR(push_new(std::move(o)));
        break;
      }
      case kBinInt:
      case kBinInt1:
      case kBinInt2: {
        const int k = op == kBinInt ? 4 : op == kBinInt1 ? 1 : 2;
        if (!take(static_cast<size_t>(k), &b)) return bad("truncated integer");
        Obj o;
        o.kind = Kind::kInt;
        o.i = op == kBinInt ? static_cast<int32_t>(le(b, 4)) : static_cast<int64_t>(le(b, k));
        GLM_RETURN_IF_ERROR(push_new(std::move(o)));
        break;
      }
      case kLong1: {
        if (!take(1, &b)) return bad("truncated LONG1");
        const int k = *b;
        if (k > 8) return refuse("integer of " + std::to_string(k) + " bytes (LONG1, limit 8)");
        if (!take(static_cast<size_t>(k), &b)) return bad("truncated LONG1");
        uint64_t v = le(b, k);
        if (k > 0 && k < 8 && (b[k - 1] & 0x80)) v |= ~uint64_t{0} << (8 * k);  // sign-extend
        Obj o;
        o.kind = Kind::kInt;
        o.i = static_cast<int64_t>(v);
        GLM_RETURN_IF_ERROR(push_new(std::move(o)));
        break;
      }
      case kBinFloat: {
        if (!take(8, &b)) return bad("truncated BINFLOAT");
        uint64_t bits = 0;
        for (int j = 0; j < 8; ++j) bits = (bits << 8) | b[j];  // big-endian
        Obj o;
        o.kind = Kind::kFloat;
        std::memcpy(&o.f, &bits, 8);
        GLM_RETURN_IF_ERROR(push_new(std::move(o)));
        break;
      }
      case kBinUnicode:
      case kShortBinUnicode:
      case kBinUnicode8: {
        const int k = op == kBinUnicode ? 4 : op == kShortBinUnicode ? 1 : 8;
        if (!take(static_cast<size_t>(k), &b)) return bad("truncated string length");
        const uint64_t len = le(b, k);
        if (len > kMaxString) return bad("string of " + std::to_string(len) + " bytes");
        GLM_RETURN_IF_ERROR(read_string(static_cast<size_t>(len)));
        break;
      }
      case kEmptyTuple:
      case kEmptyList:
      case kEmptyDict: {
        Obj o;
        o.kind = op == kEmptyTuple ? Kind::kTuple : op == kEmptyList ? Kind::kList : Kind::kDict;
        GLM_RETURN_IF_ERROR(push_new(std::move(o)));
        break;
      }
      case kMark:
        if (marks_.size() >= kMaxStack) return bad("too many MARKs");
        marks_.push_back(stack_.size());
        break;
      case kTuple:
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        Obj o;
        o.kind = Kind::kTuple;
        if (op == kTuple) {
          GLM_RETURN_IF_ERROR(pop_mark(&o.items));
        } else {
          const size_t k = static_cast<size_t>(op - kTuple1) + 1;
          o.items.resize(k);
          for (size_t j = k; j-- > 0;) GLM_RETURN_IF_ERROR(pop(&o.items[j]));
        }
        GLM_RETURN_IF_ERROR(push_new(std::move(o)));
        break;
      }
      case kAppend:
      case kAppends:
      case kSetItem:
      case kSetItems: {
        if (op == kAppends || op == kSetItems) {
          GLM_RETURN_IF_ERROR(pop_mark(&items));
        } else {
          items.assign(op == kSetItem ? 2 : 1, 0);
          for (size_t j = items.size(); j-- > 0;) GLM_RETURN_IF_ERROR(pop(&items[j]));
        }
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
          return bad("no container under the items (corrupt pickle)");
        }
        Obj& target = objs_[stack_.back()];
        const bool dict = op == kSetItem || op == kSetItems;
        if (target.kind != (dict ? Kind::kDict : Kind::kList)) {
          return bad(std::string(dict ? "SETITEM(S)" : "APPEND(S)") + " on a " +
                     kind_name(target.kind));
        }
        if (dict && items.size() % 2 != 0) return bad("SETITEMS with an odd number of items");
        if (target.items.size() + items.size() > kMaxObjects) return bad("container too large");
        target.items.insert(target.items.end(), items.begin(), items.end());
        break;
      }
      case kBinPut:
      case kLongBinPut: {
        const int k = op == kBinPut ? 1 : 4;
        if (!take(static_cast<size_t>(k), &b)) return bad("truncated PUT");
        GLM_RETURN_IF_ERROR(memo_put(le(b, k)));
        break;
      }
      case kMemoize:
        GLM_RETURN_IF_ERROR(memo_put(memo_.size()));
        break;
      case kBinGet:
      case kLongBinGet: {
        const int k = op == kBinGet ? 1 : 4;
        if (!take(static_cast<size_t>(k), &b)) return bad("truncated GET");
        GLM_RETURN_IF_ERROR(memo_get(le(b, k)));
        break;
      }
      case kGlobal: {
        std::string module;
        std::string name;
        GLM_RETURN_IF_ERROR(read_line(&module));
        GLM_RETURN_IF_ERROR(read_line(&name));
        GLM_RETURN_IF_ERROR(global(module, name));
        break;
      }
      case kStackGlobal: {
        uint32_t name = 0;
        uint32_t module = 0;
        GLM_RETURN_IF_ERROR(pop(&name));
        GLM_RETURN_IF_ERROR(pop(&module));
        if (objs_[name].kind != Kind::kStr || objs_[module].kind != Kind::kStr) {
          return bad("STACK_GLOBAL needs two strings");
        }
        GLM_RETURN_IF_ERROR(global(objs_[module].s, objs_[name].s));
        break;
      }
      case kReduce:
        GLM_RETURN_IF_ERROR(reduce());
        break;
      case kBinPersId:
        GLM_RETURN_IF_ERROR(persistent_id());
        break;
      case kBuild: {
        uint32_t state = 0;
        GLM_RETURN_IF_ERROR(pop(&state));
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
          return bad("BUILD with nothing to build");
        }
        // An OrderedDict's attributes (state_dict()'s `_metadata`): nothing we need.
        const Kind k = objs_[stack_.back()].kind;
        if (k != Kind::kDict) return refuse(std::string("BUILD on a ") + kind_name(k));
        break;
      }
      default: {
        const char* name = refused_opcode_name(op);
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        if (name != nullptr) {
          return refuse("refusing pickle opcode " + std::string(name) + " (" + hex +
                        "): a state dict does not need it (nothing was run)");
        }
        return bad("unknown pickle opcode " + std::string(hex) + " (corrupt or not a pickle)");
      }
    }
  }
}

Status Machine::to_json(uint32_t idx, int depth, nlohmann::json* out) const {
  if (depth > 32) return bad("data nested deeper than 32 levels");
  const Obj& o = objs_[idx];
  switch (o.kind) {
    case Kind::kNone:
      *out = nullptr;
      return Status::Ok();
    case Kind::kBool:
      *out = o.i != 0;
      return Status::Ok();
    case Kind::kInt:
      *out = o.i;
      return Status::Ok();
    case Kind::kFloat:
      *out = o.f;
      return Status::Ok();
    case Kind::kStr:
      *out = o.s;
      return Status::Ok();
    case Kind::kTuple:
    case Kind::kList:
      *out = nlohmann::json::array();
      for (uint32_t k : o.items) {
        nlohmann::json v;
        GLM_RETURN_IF_ERROR(to_json(k, depth + 1, &v));
        out->push_back(std::move(v));
      }
      return Status::Ok();
    case Kind::kDict:
      *out = nlohmann::json::object();
      for (size_t k = 0; k + 1 < o.items.size(); k += 2) {
        if (objs_[o.items[k]].kind != Kind::kStr) return bad("a dict key is not a str");
        nlohmann::json v;
        GLM_RETURN_IF_ERROR(to_json(o.items[k + 1], depth + 1, &v));
        (*out)[objs_[o.items[k]].s] = std::move(v);
      }
      return Status::Ok();
    default:
      return bad(std::string("a ") + kind_name(o.kind) + " where plain data was expected");
  }
}

}  // namespace

int64_t PickledTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool PickledTensor::contiguous() const {
  if (n_elements() == 0) return true;
  int64_t expect = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] != 1 && stride[k] != expect) return false;
    expect *= shape[k];
  }
  return true;
}

std::string torch_storage_name(const std::string& dtype) {
  for (const StorageClass& c : kStorageClasses) {
    if (dtype == c.dtype) return c.name;
  }
  return "";
}

StatusOr<nlohmann::json> unpickle_plain(const uint8_t* data, size_t size, const std::string& label,
                                        size_t* end) {
  Machine m(data, size, label);
  uint32_t root = 0;
  GLM_RETURN_IF_ERROR(m.run(&root));
  nlohmann::json out;
  GLM_RETURN_IF_ERROR(m.to_json(root, 0, &out));
  if (end != nullptr) *end = m.end();
  return out;
}

StatusOr<std::vector<PickledTensor>> unpickle_state_dict(const uint8_t* data, size_t size,
                                                         const std::string& label, bool legacy,
                                                         size_t* end) {
  Machine m(data, size, label, legacy);
  uint32_t root = 0;
  GLM_RETURN_IF_ERROR(m.run(&root));
  if (end != nullptr) *end = m.end();
  const Obj& dict = m.obj(root);
  if (dict.kind != Kind::kDict) {
    return bad_file(label + ": the pickle holds a " + std::string(kind_name(dict.kind)) +
                    ", not a state dict");
  }
  std::vector<PickledTensor> out;
  std::map<std::string, size_t> position;
  std::map<std::string, std::pair<std::string, int64_t>> storages;  // key -> dtype, numel
  for (size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const Obj& key = m.obj(dict.items[k]);
    const Obj& value = m.obj(dict.items[k + 1]);
    if (key.kind != Kind::kStr) {
      return bad_file(label + ": a state dict key is a " + std::string(kind_name(key.kind)));
    }
    if (value.kind != Kind::kTensor) continue;
    const TensorView& v = m.tensor(value.i);
    const Storage& s = m.storage(v.storage);
    auto [it, fresh] = storages.emplace(s.key, std::make_pair(s.dtype, s.numel));
    if (!fresh && it->second != std::make_pair(s.dtype, s.numel)) {
      return bad_file(label + ": storage " + s.key + " is named with two types or sizes");
    }
    PickledTensor t;
    t.name = key.s;
    t.storage_key = s.key;
    t.dtype = s.dtype;
    t.storage_numel = s.numel;
    t.offset = v.offset;
    t.shape = v.shape;
    t.stride = v.stride;
    auto [pos, first] = position.emplace(t.name, out.size());
    if (first) {
      out.push_back(std::move(t));
    } else {
      out[pos->second] = std::move(t);  // a repeated key: the last value wins, as in Python
    }
  }
  return out;
}

}  // namespace glm::convert
