#include "checkpoint/unpickle.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/pickle_machine.h"
#include "checkpoint/printable.h"

namespace glm::checkpoint {

using pickle::Kind;
using pickle::kind_name;
using pickle::kStorageClasses;
using pickle::Machine;
using pickle::Obj;
using pickle::Storage;
using pickle::StorageClass;
using pickle::TensorView;

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

}  // namespace glm::checkpoint
