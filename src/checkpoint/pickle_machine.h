// The pickle machine behind unpickle.h: opcodes, the object arena and the interpreter. Internal
// to the convert module (unpickle.h is the interface); see unpickle.h for the rules it enforces.
// Not thread-safe: one Machine per pickle. Cost: O(size of the pickle).
#pragma once

#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace glm::checkpoint::pickle {

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

inline const char* refused_opcode_name(uint8_t op) {
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

inline const char* kind_name(Kind k) {
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
  Status step(uint8_t op);
  Status scalar(uint8_t op);
  Status container(uint8_t op);
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

}  // namespace glm::checkpoint::pickle
