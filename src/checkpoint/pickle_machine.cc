#include "checkpoint/pickle_machine.h"

#include <cstdio>
#include <cstring>

#include "checkpoint/printable.h"

namespace glm::checkpoint::pickle {

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
  while (true) {
    op_at_ = pos_;
    const uint8_t* b = nullptr;
    if (!take(1, &b)) return bad("truncated: no STOP opcode");
    const uint8_t op = *b;
    if (op == kStop) {
      if (stack_.empty()) return bad("STOP with an empty stack");
      *result = stack_.back();
      return Status::Ok();
    }
    GLM_RETURN_IF_ERROR(step(op));
  }
}

// One opcode other than STOP: scalars and containers have their own functions.
Status Machine::step(uint8_t op) {
  const uint8_t* b = nullptr;
  switch (op) {
    case kNone:
    case kNewTrue:
    case kNewFalse:
    case kBinInt:
    case kBinInt1:
    case kBinInt2:
    case kLong1:
    case kBinFloat:
    case kBinUnicode:
    case kShortBinUnicode:
    case kBinUnicode8:
      return scalar(op);
    case kEmptyTuple:
    case kEmptyList:
    case kEmptyDict:
    case kMark:
    case kTuple:
    case kTuple1:
    case kTuple2:
    case kTuple3:
    case kAppend:
    case kAppends:
    case kSetItem:
    case kSetItems:
      return container(op);
    case kProto:
      if (!take(1, &b)) return bad("truncated PROTO");
      if (*b > 5) return refuse("pickle protocol " + std::to_string(*b) + " (at most 5)");
      return Status::Ok();
    case kFrame:
      if (!take(8, &b)) return bad("truncated FRAME");
      return Status::Ok();
    case kBinPut:
    case kLongBinPut: {
      const int k = op == kBinPut ? 1 : 4;
      if (!take(static_cast<size_t>(k), &b)) return bad("truncated PUT");
      GLM_RETURN_IF_ERROR(memo_put(le(b, k)));
      return Status::Ok();
    }
    case kMemoize:
      GLM_RETURN_IF_ERROR(memo_put(memo_.size()));
      return Status::Ok();
    case kBinGet:
    case kLongBinGet: {
      const int k = op == kBinGet ? 1 : 4;
      if (!take(static_cast<size_t>(k), &b)) return bad("truncated GET");
      GLM_RETURN_IF_ERROR(memo_get(le(b, k)));
      return Status::Ok();
    }
    case kGlobal: {
      std::string module;
      std::string name;
      GLM_RETURN_IF_ERROR(read_line(&module));
      GLM_RETURN_IF_ERROR(read_line(&name));
      GLM_RETURN_IF_ERROR(global(module, name));
      return Status::Ok();
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
      return Status::Ok();
    }
    case kReduce:
      GLM_RETURN_IF_ERROR(reduce());
      return Status::Ok();
    case kBinPersId:
      GLM_RETURN_IF_ERROR(persistent_id());
      return Status::Ok();
    case kBuild: {
      uint32_t state = 0;
      GLM_RETURN_IF_ERROR(pop(&state));
      if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
        return bad("BUILD with nothing to build");
      }
      // An OrderedDict's attributes (state_dict()'s `_metadata`): nothing we need.
      const Kind k = objs_[stack_.back()].kind;
      if (k != Kind::kDict) return refuse(std::string("BUILD on a ") + kind_name(k));
      return Status::Ok();
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
  return Status::Ok();
}

// None, booleans, integers, floats and strings.
Status Machine::scalar(uint8_t op) {
  const uint8_t* b = nullptr;
  switch (op) {
    case kNone:
      GLM_RETURN_IF_ERROR(push_new(Obj{}));
      return Status::Ok();
    case kNewTrue:
    case kNewFalse: {
      Obj o;
      o.kind = Kind::kBool;
      o.i = op == kNewTrue;
      GLM_RETURN_IF_ERROR(push_new(std::move(o)));
      return Status::Ok();
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
      return Status::Ok();
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
      return Status::Ok();
    }
    case kBinFloat: {
      if (!take(8, &b)) return bad("truncated BINFLOAT");
      uint64_t bits = 0;
      for (int j = 0; j < 8; ++j) bits = (bits << 8) | b[j];  // big-endian
      Obj o;
      o.kind = Kind::kFloat;
      std::memcpy(&o.f, &bits, 8);
      GLM_RETURN_IF_ERROR(push_new(std::move(o)));
      return Status::Ok();
    }
    case kBinUnicode:
    case kShortBinUnicode:
    case kBinUnicode8: {
      const int k = op == kBinUnicode ? 4 : op == kShortBinUnicode ? 1 : 8;
      if (!take(static_cast<size_t>(k), &b)) return bad("truncated string length");
      const uint64_t len = le(b, k);
      if (len > kMaxString) return bad("string of " + std::to_string(len) + " bytes");
      GLM_RETURN_IF_ERROR(read_string(static_cast<size_t>(len)));
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// Tuples, lists and dicts: made empty, from the stack, or filled by APPEND(S)/SETITEM(S).
Status Machine::container(uint8_t op) {
  std::vector<uint32_t> items;
  switch (op) {
    case kEmptyTuple:
    case kEmptyList:
    case kEmptyDict: {
      Obj o;
      o.kind = op == kEmptyTuple ? Kind::kTuple : op == kEmptyList ? Kind::kList : Kind::kDict;
      GLM_RETURN_IF_ERROR(push_new(std::move(o)));
      return Status::Ok();
    }
    case kMark:
      if (marks_.size() >= kMaxStack) return bad("too many MARKs");
      marks_.push_back(stack_.size());
      return Status::Ok();
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
      return Status::Ok();
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
      return Status::Ok();
    }
  }
  return Status::Ok();
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

}  // namespace glm::checkpoint::pickle
