// Tests of src/checkpoint, kept in convert_test: the ASan step of scripts/test.sh builds
// convert_test and runs these (Unpickle*, TorchZip*) under AddressSanitizer.
#include "checkpoint/unpickle.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/torch_test_writer.h"

namespace glm::checkpoint {
namespace {

using testing::PickleWriter;
using testing::torch_state_dict_pickle;
using testing::TorchStorageOut;
using testing::TorchViewOut;

// A string literal with its NUL bytes.
template <size_t N>
std::string B(const char (&s)[N]) {
  return std::string(s, N - 1);
}

StatusOr<std::vector<PickledTensor>> unpickle(const std::string& b) {
  return unpickle_state_dict(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "data.pkl");
}

std::vector<TorchStorageOut> three_storages() {
  return {{"F16", std::vector<uint8_t>(2 * 6)},
          {"BF16", std::vector<uint8_t>(2 * 300)},
          {"F32", std::vector<uint8_t>(4 * 70000)}};
}

// The pickle torch.save writes for model.state_dict(): an OrderedDict with _metadata.
TEST(Unpickle, ReadsTheStateDictTorchSaveWrites) {
  const std::vector<TorchViewOut> views = {
      {"a.weight", 0, 0, {2, 3}, {}},
      {"b.weight", 1, 0, {300}, {}},
      {"c.weight", 2, 0, {70000}, {}},
      {"scalar", 0, 5, {}, {}},
  };
  for (bool ordered : {true, false}) {
    StatusOr<std::vector<PickledTensor>> r =
        unpickle(torch_state_dict_pickle(three_storages(), views, ordered));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->size(), 4u);
    const PickledTensor& a = (*r)[0];
    EXPECT_EQ(a.name, "a.weight");
    EXPECT_EQ(a.dtype, "F16");
    EXPECT_EQ(a.storage_key, "0");
    EXPECT_EQ(a.storage_numel, 6);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.stride, (std::vector<int64_t>{3, 1}));
    EXPECT_TRUE(a.contiguous());
    EXPECT_EQ((*r)[1].dtype, "BF16");
    EXPECT_EQ((*r)[1].storage_numel, 300);  // BININT2
    EXPECT_EQ((*r)[2].dtype, "F32");
    EXPECT_EQ((*r)[2].storage_numel, 70000);  // BININT
    EXPECT_EQ((*r)[3].shape.size(), 0u);
    EXPECT_EQ((*r)[3].offset, 5);
    EXPECT_EQ((*r)[3].n_elements(), 1);
  }
}

// What CPython 3.11's pickle.Pickler(protocol=2) writes for model.state_dict() through
// torch.save's persistent_id (torch/serialization.py `_save`; Tensor.__reduce_ex__ gives
// _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())), with stand-in
// torch classes: an OrderedDict with `_metadata` {'': {'version': 1}, 'transformer': ...} of
//   a.weight  HalfStorage "0" (6),        [2, 3]
//   b.weight  BFloat16Storage "1" (300),  [300]
//   c.weight  FloatStorage "2" (70000),   [70000]
//   shared    storage "0" at offset 2,    [4]
//   t         storage "2", [4, 3] strides (1, 4)
// An independent golden: our test writer must reproduce it byte for byte, and the reader must
// read it.
constexpr char kCPythonStateDictHex[] =
    "800263636f6c6c656374696f6e730a4f726465726564446963740a710029527101285808000000612e776569"
    "676874710263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a710328285807"
    "00000073746f72616765710463746f7263680a48616c6653746f726167650a71055801000000307106580300"
    "000063707571074b06747108514b004b024b038671094b034b0186710a8968002952710b74710c52710d5808"
    "000000622e776569676874710e68032828680463746f7263680a42466c6f6174313653746f726167650a710f"
    "580100000031711068074d2c01747111514b004d2c018571124b018571138968002952711474711552711658"
    "08000000632e776569676874711768032828680463746f7263680a466c6f617453746f726167650a71185801"
    "00000032711968074a7011010074711a514b004a7011010085711b4b0185711c8968002952711d74711e5271"
    "1f580600000073686172656471206803282868046805680668074b06747121514b024b048571224b01857123"
    "8968002952712474712552712658010000007471276803282868046818681968074a70110100747128514b00"
    "4b044b038671294b014b0486712a8968002952712b74712c52712d757d712e58090000005f6d657461646174"
    "61712f68002952713028580000000071317d7132580700000076657273696f6e71334b0173580b0000007472"
    "616e73666f726d657271347d713568334b01737573622e";

std::string from_hex(const char* h) {
  std::string out;
  for (size_t i = 0; h[i] != '\0' && h[i + 1] != '\0'; i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(h + i, 2), nullptr, 16)));
  }
  return out;
}

TEST(Unpickle, ReadsCPythonsBytesForAStateDict) {
  const std::string golden = from_hex(kCPythonStateDictHex);
  const std::vector<TorchStorageOut> storages = {{"F16", std::vector<uint8_t>(2 * 6)},
                                                 {"BF16", std::vector<uint8_t>(2 * 300)},
                                                 {"F32", std::vector<uint8_t>(4 * 70000)}};
  const std::vector<TorchViewOut> views = {{"a.weight", 0, 0, {2, 3}, {}},
                                           {"b.weight", 1, 0, {300}, {}},
                                           {"c.weight", 2, 0, {70000}, {}},
                                           {"shared", 0, 2, {4}, {}},
                                           {"t", 2, 0, {4, 3}, {1, 4}}};
  EXPECT_EQ(torch_state_dict_pickle(storages, views, true), golden);
  StatusOr<std::vector<PickledTensor>> r = unpickle(golden);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 5u);
  const char* keys[] = {"0", "1", "2", "0", "2"};
  const char* dtypes[] = {"F16", "BF16", "F32", "F16", "F32"};
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ((*r)[k].name, views[k].name);
    EXPECT_EQ((*r)[k].storage_key, keys[k]);
    EXPECT_EQ((*r)[k].dtype, dtypes[k]);
    EXPECT_EQ((*r)[k].shape, views[k].shape);
    EXPECT_EQ((*r)[k].offset, views[k].offset);
  }
  EXPECT_EQ((*r)[4].stride, (std::vector<int64_t>{1, 4}));
  EXPECT_FALSE((*r)[4].contiguous());
  EXPECT_EQ((*r)[2].storage_numel, 70000);
}

// More than 1000 tensors: several MARK ... SETITEMS batches and LONG_BINPUT / LONG_BINGET.
TEST(Unpickle, ManyTensorsUseLongMemoIndices) {
  std::vector<TorchStorageOut> storages = {{"F32", std::vector<uint8_t>(4)}};
  std::vector<TorchViewOut> views;
  for (int i = 0; i < 2500; ++i) views.push_back({"t" + std::to_string(i), 0, 0, {1}, {}});
  const std::string p = torch_state_dict_pickle(storages, views, true);
  StatusOr<std::vector<PickledTensor>> r = unpickle(p);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2500u);
  EXPECT_EQ((*r)[2499].name, "t2499");
}

TEST(Unpickle, StridedAndSharedViews) {
  std::vector<TorchStorageOut> storages = {{"F32", std::vector<uint8_t>(4 * 12)}};
  const std::vector<TorchViewOut> views = {
      {"t", 0, 0, {4, 3}, {1, 4}},  // transposed
      {"u", 0, 2, {2, 5}, {5, 1}},  // offset, same storage
      {"x", 0, 0, {3, 4}, {0, 1}},  // expanded rows
  };
  StatusOr<std::vector<PickledTensor>> r = unpickle(torch_state_dict_pickle(storages, views, true));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE((*r)[0].contiguous());
  EXPECT_TRUE((*r)[1].contiguous());
  EXPECT_EQ((*r)[1].storage_key, (*r)[0].storage_key);
  EXPECT_FALSE((*r)[2].contiguous());
  // A view reaching past the storage is refused: offset 3 + 2 * 5 + 4 = 17 >= 12.
  r = unpickle(torch_state_dict_pickle(storages, {{"bad", 0, 3, {3, 5}, {5, 1}}}, true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadFile);
  EXPECT_NE(r.status().message().find("past its storage"), std::string::npos);
}

// The classic exploit shapes: a GLOBAL naming a callable, then REDUCE. Refused at the GLOBAL,
// with the name in the message; nothing is ever called.
TEST(Unpickle, RefusesEveryOtherGlobalByName) {
  const std::pair<const char*, const char*> globals[] = {
      {"os", "system"},
      {"posix", "system"},
      {"builtins", "eval"},
      {"builtins", "exec"},
      {"builtins", "getattr"},
      {"subprocess", "Popen"},
      {"torch", "load"},
      {"collections", "defaultdict"},
      {"torch._utils", "_rebuild_qtensor"},
      {"__builtin__", "eval"},
  };
  for (const auto& [module, name] : globals) {
    const std::string dotted = std::string(module) + "." + name;
    SCOPED_TRACE(dotted);
    // GLOBAL (protocol 2)
    PickleWriter w;
    w.global(module, name);
    w.mark();
    w.str("echo pwned", false);
    w.op('t');
    w.op('R');
    w.op('.');
    StatusOr<std::vector<PickledTensor>> r = unpickle(w.bytes());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(r.status().message().find("refusing global " + dotted), std::string::npos)
        << r.status().message();
    // STACK_GLOBAL (protocol 4)
    PickleWriter w4;
    w4.bytes() = "\x80\x04";
    w4.str(module, false);
    w4.str(name, false);
    w4.op(0x93);
    w4.op(')');
    w4.op('R');
    w4.op('.');
    r = unpickle(w4.bytes());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("refusing global " + dotted), std::string::npos);
  }
  // The bytes `python -c "pickle.dumps(os.system, 0)"`-style exploits use (protocol 0).
  const std::string classic = "cos\nsystem\n(S'id'\ntR.";
  StatusOr<std::vector<PickledTensor>> r = unpickle(classic);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("os.system"), std::string::npos);
}

TEST(Unpickle, RefusesCodeRunningOpcodesByName) {
  const std::pair<std::string, const char*> cases[] = {
      {B("\x80\x02(X\x02\x00\x00\x00idios\nsystem\n."), "INST"},
      {B("\x80\x02(X\x01\x00\x00\x00xo."), "OBJ"},
      {B("\x80\x02N)\x81."), "NEWOBJ"},
      {B("\x80\x02N)}\x92."), "NEWOBJ_EX"},
      {B("\x80\x02\x82\x01."), "EXT1"},
      {B("\x80\x02\x83\x01\x00."), "EXT2"},
      {B("\x80\x02\x84\x01\x00\x00\x00."), "EXT4"},
      {B("\x80\x02Pabc\n."), "PERSID"},
      {B("\x80\x02I1\n."), "INT"},
      {B("\x80\x02U\x02hi."), "SHORT_BINSTRING"},
      {B("\x80\x02\x8f."), "EMPTY_SET"},
      {B("\x80\x02N0."), "POP"},
  };
  for (const auto& [bytes, name] : cases) {
    SCOPED_TRACE(name);
    StatusOr<std::vector<PickledTensor>> r = unpickle(bytes);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported) << r.status().message();
    EXPECT_NE(r.status().message().find(std::string("opcode ") + name + " "), std::string::npos)
        << r.status().message();
  }
}

// Allowed globals used in a way a state dict never does are refused too.
TEST(Unpickle, AllowedGlobalsOnlyInTheirRoles) {
  PickleWriter a;  // calling a storage class
  a.global("torch", "FloatStorage");
  a.op(')');
  a.op('R');
  a.op('.');
  StatusOr<std::vector<PickledTensor>> r = unpickle(a.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("torch.FloatStorage"), std::string::npos);

  PickleWriter b;  // OrderedDict with arguments
  b.global("collections", "OrderedDict");
  b.op(']');
  b.op(0x85);
  b.op('R');
  b.op('.');
  r = unpickle(b.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("OrderedDict called with arguments"), std::string::npos);

  PickleWriter c;  // _rebuild_tensor_v2 on something other than a storage
  c.global("torch._utils", "_rebuild_tensor_v2");
  c.mark();
  for (int i = 0; i < 6; ++i) c.integer(0);
  c.op('t');
  c.op('R');
  c.op('.');
  r = unpickle(c.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a storage"), std::string::npos);

  PickleWriter d;  // BUILD on a list
  d.op(']');
  d.op('}');
  d.op('b');
  d.op('.');
  r = unpickle(d.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("BUILD on a list"), std::string::npos);
}

// Every prefix of a valid pickle is an error (never a crash, never a half result).
TEST(Unpickle, TruncatedPicklesAreErrors) {
  const std::string p = torch_state_dict_pickle(
      three_storages(), {{"a", 0, 0, {2, 3}, {}}, {"b", 1, 0, {300}, {}}}, true);
  ASSERT_TRUE(unpickle(p).ok());
  for (size_t n = 0; n < p.size(); ++n) {
    StatusOr<std::vector<PickledTensor>> r = unpickle(p.substr(0, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

// Random bytes and random corruptions of a valid pickle: a Status, never a crash (the fuzz
// target does this at scale).
TEST(Unpickle, GarbageIsAnErrorNotACrash) {
  const std::string p = torch_state_dict_pickle(
      three_storages(), {{"a", 0, 0, {2, 3}, {}}, {"b", 1, 0, {300}, {}}}, true);
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  };
  int ok = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b = p;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int f = 0; f < flips; ++f) b[next() % b.size()] = static_cast<char>(next());
    if (unpickle(b).ok()) ++ok;
    std::string g(next() % 64, '\0');
    for (char& c : g) c = static_cast<char>(next());
    if (next() % 2) g = "\x80\x02" + g;
    (void)unpickle(g);
  }
  EXPECT_LT(ok, 20000);
}

TEST(Unpickle, HostileSizesAreBounded) {
  auto fails_with = [](const std::string& b, const std::string& what) {
    StatusOr<std::vector<PickledTensor>> r = unpickle(b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  };
  fails_with(std::string("\x80\x02X\xff\xff\xff\x7f", 8), "string of 2147483647 bytes");
  fails_with(std::string("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\xff", 11), "string of");
  fails_with(B("\x80\x02X\x10\x00\x00\x00"
               "abc"),
             "truncated string");
  fails_with("\x80\x02" + std::string(2000000, '('), "too many MARKs");
  fails_with("\x80\x02" + std::string(2000000, 'N'), "stack deeper");
  fails_with(std::string("\x80\x02h\x07.", 5), "memo key 7 was never put");
  fails_with(std::string("\x80\x02\x8a\x09\x01\x01\x01\x01\x01\x01\x01\x01\x01.", 14),
             "integer of 9 bytes");
  fails_with(std::string("\x80\x02s.", 4), "stack underflow");
  fails_with(std::string("\x80\x02(t", 4), "no STOP");
  fails_with(std::string("\x80\x02t.", 4), "no MARK");
  fails_with(std::string("\x80\x09.", 3), "pickle protocol 9");
  fails_with(std::string("\x80\x02\xff.", 4), "unknown pickle opcode 0xff");
  fails_with(std::string("\x80\x02K\x01.", 5), "holds a int, not a state dict");
  fails_with(
      "\x80\x02"
      "c" +
          std::string(300, 'a') + "\nb\n.",
      "longer than 256");
  // A negative stride (BININT -1).
  PickleWriter w;
  w.op('}');
  w.str("t", false);
  w.global("torch._utils", "_rebuild_tensor_v2");
  w.mark();
  w.mark();
  w.str("storage", true);
  w.global("torch", "FloatStorage");
  w.str("0", true);
  w.str("cpu", true);
  w.integer(4);
  w.op('t');
  w.op('Q');
  w.integer(3);
  w.int_tuple({4});
  w.int_tuple({-1});
  w.op(0x89);
  w.op('}');
  w.op('t');
  w.op('R');
  w.op('s');
  w.op('.');
  fails_with(w.bytes(), "stride holds -1");
}

// A list appended to itself: cycles are harmless (indices, not owning pointers; ASan's leak
// checker sees to it).
TEST(Unpickle, CyclesAndRepeatedKeys) {
  const std::string cycle =
      B("\x80\x02]q\x00h\x00"
        "a}q\x01X\x01\x00\x00\x00kh\x00s.");
  StatusOr<std::vector<PickledTensor>> r = unpickle(cycle);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->empty());  // a dict without tensors

  // {"a": t0, "b": t1, "a": t2}: one "a", holding the last value, at the first position.
  std::vector<TorchStorageOut> storages = {{"F32", std::vector<uint8_t>(4 * 8)}};
  r = unpickle(torch_state_dict_pickle(
      storages, {{"a", 0, 0, {1}, {}}, {"b", 0, 1, {1}, {}}, {"a", 0, 2, {1}, {}}}, false));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "a");
  EXPECT_EQ((*r)[0].offset, 2);
  EXPECT_EQ((*r)[1].name, "b");
}

// Protocol 4 opcodes (FRAME, SHORT_BINUNICODE, MEMOIZE) and _rebuild_parameter.
TEST(Unpickle, Protocol4AndParameters) {
  std::string b = "\x80\x04\x95";
  b += std::string(8, '\0');  // frame length (not checked)
  b += "}\x94";               // EMPTY_DICT MEMOIZE
  b += "\x8c\x01w\x94";       // 'w'
  b += "\x8c\x0ctorch._utils\x94\x8c\x12_rebuild_parameter\x94\x93\x94";
  b += "\x8c\x0ctorch._utils\x94\x8c\x12_rebuild_tensor_v2\x94\x93\x94";
  b += "(";
  b += "(\x8c\x07storage\x94\x8c\x05torch\x94\x8c\x0bHalfStorage\x94\x93\x94";
  b += "\x8c\x01"
       "0\x94\x8c\x03"
       "cpu\x94K\x04t\x94Q";
  b += B("K\x00K\x04\x85\x94K\x01\x85\x94\x89");
  b += "\x8c\x0b"
       "collections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94";
  b += "t\x94R\x94";                    // the tensor
  b += "\x88h\x13)R\x94\x87\x94R\x94";  // _rebuild_parameter(tensor, True, OrderedDict())
  b += "s.";
  StatusOr<std::vector<PickledTensor>> r = unpickle(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "w");
  EXPECT_EQ((*r)[0].dtype, "F16");
  EXPECT_EQ((*r)[0].shape, std::vector<int64_t>{4});
}

}  // namespace
}  // namespace glm::checkpoint
