#include "model/kv_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

namespace glm::model {
namespace {

Config small_config() {
  Config c;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 8;
  c.n_embd = 32;
  return c;
}

TEST(KvPool, SizesFollowTheShape) {
  KvPool f16(small_config(), 5, 4, DType::kF16);
  EXPECT_EQ(f16.row_elems(), 16);
  EXPECT_EQ(f16.block_bytes(), size_t{3} * 2 * 4 * 16 * 2);
  EXPECT_EQ(f16.bytes(), 5 * f16.block_bytes());
  KvPool f32(small_config(), 5, 4, DType::kF32);
  EXPECT_EQ(f32.bytes(), 2 * f16.bytes());
  EXPECT_EQ(f32.kv_type(), DType::kF32);
}

// A model on a GPU keeps the K/V of its GPU layers in device memory (Model::kv_host_layers):
// the pool holds only the leading host layers, and its blocks' disk form keeps every layer's
// place (the model fills in the rest).
TEST(KvPool, HostLayersHoldOnlyTheLeadingLayers) {
  KvPool all(small_config(), 5, 4, DType::kF16);
  KvPool one(small_config(), 5, 4, DType::kF16, 1);
  KvPool none(small_config(), 5, 4, DType::kF16, 0);
  EXPECT_EQ(one.host_layers(), 1);
  EXPECT_EQ(one.bytes() * 3, all.bytes());
  EXPECT_EQ(none.bytes(), 0u);
  EXPECT_EQ(one.block_bytes(), all.block_bytes());
  std::memset(one.k(0, 2), 7, one.row_bytes());
  std::vector<uint8_t> data(one.block_bytes(), 0xAB);
  one.save_block(2, data.data());
  EXPECT_EQ(data[0], 7);                   // layer 0's K, first row
  EXPECT_EQ(data[4 * 16 * 2], 0);          // layer 0's V (a block: 4 rows of 16 f16)
  EXPECT_EQ(data[2 * 4 * 16 * 2], 0xAB);   // layer 1: left to the model
  EXPECT_EQ(data[data.size() - 1], 0xAB);  // layer 2
  none.copy_block(1, 2);                   // nothing on the host: nothing to copy
}

TEST(KvPool, Q8_0RowsAreBlocksOf34BytesAndNeedRowsOf32) {
  Config c = small_config();
  EXPECT_NE(kv_type_unsupported(c, DType::kQ8_0), "");  // a row of 16 values
  c.head_dim = 48;                                      // 96 = 3 blocks, heads start mid-block
  EXPECT_EQ(kv_type_unsupported(c, DType::kQ8_0), "");
  KvPool q8(c, 5, 4, DType::kQ8_0);
  EXPECT_EQ(q8.row_bytes(), size_t{3} * 34);
  EXPECT_EQ(q8.block_bytes(), size_t{3} * 2 * 4 * 3 * 34);
  EXPECT_EQ(q8.bytes(), 5 * q8.block_bytes());
  EXPECT_EQ(static_cast<uint8_t*>(q8.k(0, 1)) - static_cast<uint8_t*>(q8.k(0, 0)),
            static_cast<ptrdiff_t>(4 * q8.row_bytes()));
  // copy_block and save/load move bytes: the same for every type.
  std::memset(q8.k(2, 3), 7, 4 * q8.row_bytes());
  q8.copy_block(3, 0);
  EXPECT_EQ(std::memcmp(q8.k(2, 0), q8.k(2, 3), 4 * q8.row_bytes()), 0);
  DType t;
  for (const char* name : {"f16", "f32", "q8_0"}) EXPECT_TRUE(kv_type_from_name(name, &t)) << name;
  EXPECT_FALSE(kv_type_from_name("q4_0", &t));
  EXPECT_FALSE(kv_type_from_name("F16", &t));
}

TEST(KvPool, CopyBlockCopiesEveryLayersKAndVOfThatBlockOnly) {
  KvPool kv(small_config(), 4, 4, DType::kF16);
  const size_t span = 4 * 16 * 2;
  for (int l = 0; l < 3; ++l) {
    for (int b = 0; b < 4; ++b) {
      std::memset(kv.k(l, b), 10 * l + b, span);
      std::memset(kv.v(l, b), 100 + 10 * l + b, span);
    }
  }
  kv.copy_block(1, 3);
  for (int l = 0; l < 3; ++l) {
    for (int b = 0; b < 4; ++b) {
      const int from = b == 3 ? 1 : b;
      const auto* k = static_cast<const uint8_t*>(kv.k(l, b));
      const auto* v = static_cast<const uint8_t*>(kv.v(l, b));
      for (size_t i = 0; i < span; ++i) {
        ASSERT_EQ(k[i], 10 * l + from) << l << " " << b;
        ASSERT_EQ(v[i], 100 + 10 * l + from) << l << " " << b;
      }
    }
  }
}

TEST(KvPool, ASavedBlockLoadsBackIntoAnotherPoolExactly) {
  KvPool a(small_config(), 4, 4, DType::kF16);
  const size_t span = 4 * 16 * 2;
  for (int l = 0; l < 3; ++l) {
    for (int b = 0; b < 4; ++b) {
      for (size_t i = 0; i < span; ++i) {
        static_cast<uint8_t*>(a.k(l, b))[i] = static_cast<uint8_t>(i * 7 + l * 3 + b);
        static_cast<uint8_t*>(a.v(l, b))[i] = static_cast<uint8_t>(i * 5 + l + 11 * b);
      }
    }
  }
  std::vector<uint8_t> bytes(a.block_bytes());
  a.save_block(2, bytes.data());
  KvPool b(small_config(), 4, 4, DType::kF16);
  b.load_block(1, bytes.data());
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(std::memcmp(a.k(l, 2), b.k(l, 1), span), 0) << l;
    EXPECT_EQ(std::memcmp(a.v(l, 2), b.v(l, 1), span), 0) << l;
    for (int other : {0, 2, 3}) {  // the others untouched (zero-filled)
      EXPECT_EQ(static_cast<const uint8_t*>(b.k(l, other))[0], 0);
    }
  }
}

// A latent-attention model (GLM-4.7-Flash) keeps K rows only: half the bytes, v() is k(), and
// a block's saved form, its copies and the sizes the planner asks for follow.
TEST(KvPool, ALatentAttentionModelKeepsItsKRowsOnly) {
  Config c = small_config();
  c.n_head_kv = 1;
  c.head_dim = 16;  // kv_lora 12 + rope 4
  c.n_rot = 4;
  c.mla.kv_lora = 12;
  c.mla.q_lora = 8;
  c.mla.k_head = 8;
  c.mla.v_head = 8;
  KvPool p(c, 4, 4, DType::kF16);
  EXPECT_EQ(p.parts(), 1);
  EXPECT_EQ(p.block_bytes(), size_t{3} * 1 * 4 * 16 * 2);
  EXPECT_EQ(p.bytes(), KvPool::bytes_for(c, 4, 4, DType::kF16));
  EXPECT_EQ(p.bytes(), 4 * p.block_bytes());
  Config mha = c;
  mha.mla = MlaConfig();
  EXPECT_EQ(KvPool::bytes_for(mha, 4, 4, DType::kF16), 2 * p.bytes());
  const size_t span = 4 * 16 * 2;
  for (int l = 0; l < 3; ++l) {
    for (int b = 0; b < 4; ++b) {
      EXPECT_EQ(p.v(l, b), p.k(l, b));
      for (size_t i = 0; i < span; ++i) {
        static_cast<uint8_t*>(p.k(l, b))[i] = static_cast<uint8_t>(i * 7 + l * 3 + b);
      }
    }
  }
  std::vector<uint8_t> bytes(p.block_bytes());
  p.save_block(2, bytes.data());
  KvPool q(c, 4, 4, DType::kF16);
  q.load_block(1, bytes.data());
  p.copy_block(2, 0);
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(std::memcmp(p.k(l, 2), q.k(l, 1), span), 0) << l;
    EXPECT_EQ(std::memcmp(p.k(l, 2), p.k(l, 0), span), 0) << l;
    EXPECT_NE(std::memcmp(p.k(l, 2), p.k(l, 3), span), 0) << l;
  }
}

TEST(KvPool, BlocksAreDisjointAndInside) {
  KvPool kv(small_config(), 5, 4, DType::kF16);
  const uint8_t* base = static_cast<const uint8_t*>(static_cast<const KvPool&>(kv).k(0, 0));
  const size_t span = 4 * 16 * 2;  // one block of one layer's K
  std::set<const uint8_t*> starts;
  for (int l = 0; l < 3; ++l) {
    for (int b = 0; b < 5; ++b) {
      for (const void* p : {kv.k(l, b), kv.v(l, b)}) {
        const uint8_t* u = static_cast<const uint8_t*>(p);
        ASSERT_GE(u, base);
        ASSERT_LE(u + span, base + kv.bytes());
        EXPECT_EQ((u - base) % span, 0u);
        EXPECT_TRUE(starts.insert(u).second) << "layer " << l << " block " << b;
      }
    }
  }
  EXPECT_EQ(starts.size(), size_t{3} * 5 * 2);
}

}  // namespace
}  // namespace glm::model
