#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kv/test_util.h"

namespace glm::kv {
namespace {

using testing::input;
using testing::seq_tokens;

// Runs a sequence the way the scheduler does: prefill the uncached part, then decode `gen`.
void run(KvCache* kv, Admitted* a, const std::vector<int32_t>& gen) {
  const int n = static_cast<int>(a->prompt.size());
  kv->grow(&a->kv, n);
  kv->commit(&a->kv, a->prompt.data() + a->n_cached, n - a->n_cached);
  for (size_t i = 0; i + 1 < gen.size(); ++i) {  // the last generated token is never fed
    kv->grow(&a->kv, static_cast<int>(a->kv.tokens.size()) + 1);
    kv->commit(&a->kv, &gen[i], 1);
  }
}

TEST(KvCache, SharedPrefixReusesFullBlocksOnly) {
  KvCache kv(16, 4);
  auto p1 = seq_tokens(0, 10);  // blocks [0..3] [4..7] and a partial one
  Admitted a;
  ASSERT_EQ(kv.admit(input(p1, 3), &a), AdmitResult::kAdmitted);
  EXPECT_EQ(a.n_cached, 0);
  run(&kv, &a, {50, 51, 52});
  auto p2 = seq_tokens(0, 9);
  p2.push_back(99);
  Admitted b;
  ASSERT_EQ(kv.admit(input(p2, 3), &b), AdmitResult::kAdmitted);
  EXPECT_EQ(b.n_cached, 8);
  EXPECT_EQ(b.kv.blocks[0], a.kv.blocks[0]);
  EXPECT_EQ(b.kv.blocks[1], a.kv.blocks[1]);
  EXPECT_EQ(kv.allocator().refcount(a.kv.blocks[0]), 2);
  kv.release(&a.kv);
  kv.release(&b.kv);
  EXPECT_EQ(kv.allocator().n_used(), 0);
  EXPECT_EQ(kv.allocator().n_reserved(), 0);
}

// Adapters (AdmitInput::salt): the same tokens under another adapter (or none) reuse nothing;
// under the same adapter, the full blocks as usual.
TEST(KvCache, PrefixBlocksAreNeverSharedAcrossAdapters) {
  KvCache kv(32, 4);
  auto p = seq_tokens(0, 10);
  auto admit = [&](uint64_t salt) {
    AdmitInput in = input(p, 3);
    in.salt = salt;
    Admitted a;
    EXPECT_EQ(kv.admit(in, &a), AdmitResult::kAdmitted);
    return a;
  };
  Admitted base = admit(0);
  run(&kv, &base, {50, 51, 52});
  Admitted a7 = admit(7);
  EXPECT_EQ(a7.n_cached, 0);
  run(&kv, &a7, {60, 61, 62});
  Admitted a9 = admit(9);
  EXPECT_EQ(a9.n_cached, 0);
  Admitted again7 = admit(7);
  EXPECT_EQ(again7.n_cached, 8);
  EXPECT_EQ(again7.kv.blocks[0], a7.kv.blocks[0]);
  Admitted again0 = admit(0);
  EXPECT_EQ(again0.n_cached, 8);
  EXPECT_EQ(again0.kv.blocks[0], base.kv.blocks[0]);
  EXPECT_NE(chain_root(7), chain_root(0));
  for (Admitted* a : {&base, &a7, &a9, &again7, &again0}) kv.release(&a->kv);
  EXPECT_EQ(kv.allocator().n_used(), 0);
}

// n > 1: forks share the prompt's full blocks, copy its partial one, and take their share of
// the reservation made at admission.
TEST(KvCache, ForksShareFullBlocksCopyThePartialOneAndReserveTheirGrowth) {
  KvCache kv(32, 4);
  auto p = seq_tokens(0, 10);  // two full blocks and 2 positions of a third
  AdmitInput in = input(p, 6);
  in.n_forks = 2;
  Admitted a;
  ASSERT_EQ(kv.admit(in, &a), AdmitResult::kAdmitted);
  // Each sequence may reach 10 + 5 positions = 4 blocks; a fork shares 2 of them.
  EXPECT_EQ(a.fork_reserve, 2);
  EXPECT_EQ(kv.allocator().n_reserved(), 4 + 2 * 2);
  kv.grow(&a.kv, 10);
  kv.commit(&a.kv, p.data(), 10);
  SeqKv f1, f2;
  const ForkCopy c1 = kv.fork(&a.kv, a.fork_reserve, &f1);
  const ForkCopy c2 = kv.fork(&a.kv, a.fork_reserve, &f2);
  EXPECT_EQ(c1.src, a.kv.blocks[2]);
  EXPECT_EQ(c2.src, a.kv.blocks[2]);
  EXPECT_NE(c1.dst, c2.dst);
  EXPECT_NE(c1.dst, c1.src);
  for (const SeqKv* f : {&f1, &f2}) {
    ASSERT_EQ(f->blocks.size(), 3u);
    EXPECT_EQ(f->blocks[0], a.kv.blocks[0]);
    EXPECT_EQ(f->blocks[1], a.kv.blocks[1]);
    EXPECT_EQ(f->tokens, p);
    EXPECT_EQ(f->reserved, 1);
  }
  EXPECT_EQ(kv.allocator().refcount(a.kv.blocks[0]), 3);
  EXPECT_EQ(kv.allocator().refcount(a.kv.blocks[2]), 1);
  EXPECT_EQ(a.kv.reserved, 1);  // 3 of 4 allocated
  // Each grows into its own blocks up to its reach; what becomes full is published.
  for (SeqKv* s : {&a.kv, &f1, &f2}) {
    for (int32_t t = 50; t < 55; ++t) {
      kv.grow(s, static_cast<int>(s->tokens.size()) + 1);
      kv.commit(s, &t, 1);
    }
    EXPECT_EQ(s->blocks.size(), 4u);
    EXPECT_EQ(s->reserved, 0);
  }
  EXPECT_EQ(kv.allocator().n_reserved(), 0);
  kv.release(&f1);
  kv.release(&a.kv);
  EXPECT_EQ(kv.allocator().refcount(f2.blocks[0]), 1);
  kv.release(&f2);
  EXPECT_EQ(kv.allocator().n_used(), 0);
  // On a block boundary nothing is copied; a group that can never fit is refused.
  auto q = seq_tokens(100, 8);
  AdmitInput qi = input(q, 1);
  qi.n_forks = 1;
  Admitted b;
  ASSERT_EQ(kv.admit(qi, &b), AdmitResult::kAdmitted);
  kv.grow(&b.kv, 8);
  kv.commit(&b.kv, q.data(), 8);
  SeqKv g;
  EXPECT_EQ(kv.fork(&b.kv, b.fork_reserve, &g).src, -1);
  kv.release(&g);
  kv.release(&b.kv);
  const std::vector<int32_t> long_prompt = seq_tokens(0, 40);  // outlives `big`, which points to it
  AdmitInput big = input(long_prompt, 40);
  big.n_forks = 3;  // 20 blocks + 3 x 10 > 32
  EXPECT_EQ(kv.admit(big, &b), AdmitResult::kNeverFits);
  EXPECT_EQ(kv.allocator().n_reserved(), 0);
  EXPECT_EQ(kv.allocator().n_used(), 0);
}

// A bidirectional prompt (reuse = false) neither takes cached blocks nor offers its own.
TEST(KvCache, NoReuseNeitherTakesNorSharesBlocks) {
  KvCache kv(16, 4);
  auto p = seq_tokens(0, 10);
  Admitted a;
  ASSERT_EQ(kv.admit(input(p, 3), &a), AdmitResult::kAdmitted);
  run(&kv, &a, {50, 51, 52});
  AdmitInput private_in = input(p, 3);
  private_in.reuse = false;
  Admitted b;
  ASSERT_EQ(kv.admit(private_in, &b), AdmitResult::kAdmitted);
  EXPECT_EQ(b.n_cached, 0);  // a's published blocks are not taken
  run(&kv, &b, {50, 51, 52});
  kv.release(&a.kv);
  kv.release(&b.kv);
  Admitted c;
  ASSERT_EQ(kv.admit(input(p, 3), &c), AdmitResult::kAdmitted);
  EXPECT_EQ(c.n_cached, 8);  // a's blocks, still cached
  kv.release(&c.kv);
  // Only b ran: nothing was published, nothing is cached afterwards.
  KvCache fresh(16, 4);
  Admitted d;
  ASSERT_EQ(fresh.admit(private_in, &d), AdmitResult::kAdmitted);
  run(&fresh, &d, {50, 51, 52});
  fresh.release(&d.kv);
  Admitted e;
  ASSERT_EQ(fresh.admit(input(p, 3), &e), AdmitResult::kAdmitted);
  EXPECT_EQ(e.n_cached, 0);
  fresh.release(&e.kv);
  EXPECT_EQ(fresh.allocator().n_used(), 0);
}

TEST(KvCache, AFullyCachedPromptStillRunsItsLastBlock) {
  KvCache kv(16, 4);
  auto p = seq_tokens(0, 8);
  Admitted a;
  ASSERT_EQ(kv.admit(input(p, 2), &a), AdmitResult::kAdmitted);
  run(&kv, &a, {1, 2});
  kv.release(&a.kv);
  Admitted b;
  ASSERT_EQ(kv.admit(input(p, 2), &b), AdmitResult::kAdmitted);
  EXPECT_EQ(b.n_cached, 4);  // one token at least must produce logits
  kv.release(&b.kv);
}

// Unless the caller keeps the prompt's logits (PromptLogits): then every token may come from the
// cache, the partly written last block's too (copied), and none runs.
TEST(KvCache, APromptWhoseLogitsAreKeptRunsNone) {
  KvCache kv(16, 4);
  int copies = 0;
  kv.set_copy_block([&](int, int) { ++copies; });
  for (int n : {8, 7, 1}) {
    auto p = seq_tokens(10 * n, n);
    Admitted a;
    ASSERT_EQ(kv.admit(input(p, 3), &a), AdmitResult::kAdmitted);
    run(&kv, &a, {1, 2, 3});
    kv.release(&a.kv);
    AdmitInput in = input(p, 3);
    in.logits_kept = true;
    Admitted b;
    ASSERT_EQ(kv.admit(in, &b), AdmitResult::kAdmitted);
    EXPECT_EQ(b.n_cached, n);
    EXPECT_EQ(b.kv.tokens, p);
    EXPECT_EQ(copies, n % 4 == 0 ? 0 : n == 7 ? 1 : 2) << n;  // 7: the block of 4..7
    kv.release(&b.kv);
  }
  EXPECT_EQ(kv.allocator().n_used(), 0);
  EXPECT_EQ(kv.allocator().n_reserved(), 0);
}

TEST(KvCache, ConversationTurnPrefillsOnlyTheNewTokens) {
  KvCache kv(32, 4);
  auto p1 = seq_tokens(0, 6);
  const std::vector<int32_t> gen = {70, 71, 72};
  Admitted t1;
  ASSERT_EQ(kv.admit(input(p1, 8), &t1), AdmitResult::kAdmitted);
  run(&kv, &t1, gen);
  // Finished by length: the last token was sampled but never fed.
  kv.save_conversation("c", 1234, &t1.kv, {gen.back()});
  EXPECT_EQ(kv.allocator().n_reserved(), 0);

  const std::vector<int32_t> tail = {90, 91};
  auto full = seq_tokens(0, 20);  // a re-rendering: ignored on the conversation path
  AdmitInput in = input(full, 4);
  in.conversation = "c";
  in.history_tag = 1234;
  in.tail = &tail;
  Admitted t2;
  ASSERT_EQ(kv.admit(in, &t2), AdmitResult::kAdmitted);
  EXPECT_TRUE(t2.from_conversation);
  EXPECT_EQ(t2.n_cached, 8);  // 6 prompt + 2 fed generated tokens
  const std::vector<int32_t> want = {0, 1, 2, 3, 4, 5, 70, 71, 72, 90, 91};
  EXPECT_EQ(t2.prompt, want);
  EXPECT_FALSE(kv.has_conversation("c"));  // in use
  kv.release(&t2.kv);
  EXPECT_EQ(kv.allocator().n_used(), 0);
}

TEST(KvCache, StaleConversationFallsBackToThePrompt) {
  KvCache kv(32, 4);
  auto p1 = seq_tokens(0, 6);
  Admitted t1;
  ASSERT_EQ(kv.admit(input(p1, 4), &t1), AdmitResult::kAdmitted);
  run(&kv, &t1, {7, 8});
  kv.save_conversation("c", 1, &t1.kv, {});
  const std::vector<int32_t> tail = {9};
  auto full = seq_tokens(0, 12);
  AdmitInput in = input(full, 4);
  in.conversation = "c";
  in.history_tag = 2;  // the client edited its history
  in.tail = &tail;
  Admitted t2;
  ASSERT_EQ(kv.admit(in, &t2), AdmitResult::kAdmitted);
  EXPECT_FALSE(t2.from_conversation);
  EXPECT_EQ(t2.prompt, full);
  EXPECT_EQ(t2.n_cached, 4);  // still the first full block through the prefix cache
  EXPECT_FALSE(kv.has_conversation("c"));
  kv.release(&t2.kv);
  EXPECT_EQ(kv.allocator().n_used(), 0);
}

TEST(KvCache, AdmissionWaitsWhenMemoryIsPromisedAndRefusesWhatNeverFits) {
  KvCache kv(4, 4);
  auto p = seq_tokens(0, 5);
  Admitted a;
  ASSERT_EQ(kv.admit(input(p, 4), &a), AdmitResult::kAdmitted);  // 8 positions: 2 blocks
  EXPECT_EQ(kv.allocator().n_available(), 2);
  auto q = seq_tokens(100, 9);
  Admitted b;
  EXPECT_EQ(kv.admit(input(q, 1), &b), AdmitResult::kWait);  // needs 3
  EXPECT_EQ(kv.allocator().n_reserved(), 2);                 // nothing leaked by the refusal
  auto huge = seq_tokens(200, 17);
  EXPECT_EQ(kv.admit(input(huge, 1), &b), AdmitResult::kNeverFits);
  kv.release(&a.kv);
  EXPECT_EQ(kv.admit(input(q, 1), &b), AdmitResult::kAdmitted);
  kv.release(&b.kv);
}

TEST(KvCache, MemoryPressureEvictsIdleConversationsOldestFirst) {
  KvCache kv(6, 4);
  for (const char* name : {"a", "b", "c"}) {
    auto p = seq_tokens(name[0] * 100, 7);
    Admitted s;
    ASSERT_EQ(kv.admit(input(p, 1), &s), AdmitResult::kAdmitted);
    run(&kv, &s, {1});
    kv.save_conversation(name, 0, &s.kv, {});
  }
  EXPECT_EQ(kv.allocator().n_used(), 6);
  // Needs 2 blocks: evicting "a" (the oldest) is enough.
  auto p = seq_tokens(5000, 8);
  Admitted s;
  ASSERT_EQ(kv.admit(input(p, 1), &s), AdmitResult::kAdmitted);
  EXPECT_FALSE(kv.has_conversation("a"));
  EXPECT_TRUE(kv.has_conversation("b"));
  EXPECT_TRUE(kv.has_conversation("c"));
  kv.release(&s.kv);
  kv.clear_conversations();
  EXPECT_EQ(kv.allocator().n_used(), 0);
}

TEST(KvCache, NoBlockLeaksAfterAThousandRandomRequestsAndCancels) {
  KvCache kv(64, 4, /*max_conversations=*/8);
  std::mt19937 rng(1);
  std::vector<Admitted> running;
  std::vector<std::vector<int32_t>> conv_tokens(12);
  int admitted = 0, waited = 0, reused = 0;
  for (int i = 0; i < 1000; ++i) {
    // Admit one request: a shared system prefix, a random body, sometimes a conversation turn.
    std::vector<int32_t> prompt = seq_tokens(0, 8);
    const int body = 1 + rng() % 30;
    for (int j = 0; j < body; ++j) prompt.push_back(1000 + rng() % 5);
    const int conv = rng() % 12;
    const std::vector<int32_t> tail = {static_cast<int32_t>(rng() % 50)};
    AdmitInput in = input(prompt, 1 + rng() % 20, 200);
    in.conversation = "c" + std::to_string(conv);
    in.history_tag = conv;
    in.tail = &tail;
    Admitted a;
    const AdmitResult r = kv.admit(in, &a);
    ASSERT_NE(r, AdmitResult::kNeverFits);
    if (r == AdmitResult::kAdmitted) {
      ++admitted;
      reused += a.n_cached > 0;
      running.push_back(std::move(a));
    } else {
      ++waited;
    }
    // Advance or end a random running sequence: prefill, finish, cancel mid-way, or save.
    if (!running.empty()) {
      const size_t k = rng() % running.size();
      Admitted& s = running[k];
      const int action = rng() % 4;
      if (action == 0) {  // cancelled while queued-to-prefill
        kv.release(&s.kv);
      } else {
        const int n = static_cast<int>(s.prompt.size());
        const int upto = action == 1 ? s.n_cached + (n - s.n_cached) / 2 : n;  // 1: mid-prefill
        kv.grow(&s.kv, upto);
        kv.commit(&s.kv, s.prompt.data() + s.n_cached, upto - s.n_cached);
        if (action == 3) {
          const std::string key = "c" + std::to_string(rng() % 12);
          kv.save_conversation(key, rng() % 12, &s.kv, {});
        } else {
          kv.release(&s.kv);
        }
      }
      running.erase(running.begin() + k);
    }
    ASSERT_GE(kv.allocator().n_available(), 0);
  }
  for (Admitted& s : running) kv.release(&s.kv);
  kv.clear_conversations();
  EXPECT_EQ(kv.allocator().n_used(), 0);
  EXPECT_EQ(kv.allocator().n_reserved(), 0);
  EXPECT_EQ(kv.allocator().n_free(), 64);
  EXPECT_GT(admitted, 500);  // the mix really exercised admission...
  EXPECT_GT(reused, 100);    // ...and reuse
  (void)waited;
}

// Token-granular reuse, checked against a model of the KV memory: every block holds the tokens
// written at its positions (what their K/V are computed from), copies included. After every
// admission, each cached position of the sequence must hold its prompt token: whole blocks
// shared, a partial block copied, or a saved conversation continued.
TEST(KvCache, EveryCachedPositionHoldsItsPromptTokenUnderRandomReuse) {
  constexpr int kBlocks = 48, kBt = 4;
  KvCache kv(kBlocks, kBt, /*max_conversations=*/6);
  std::vector<std::vector<int32_t>> memory(kBlocks, std::vector<int32_t>(kBt, -1));  // [block, bt]
  int copies = 0;
  kv.set_copy_block([&](int src, int dst) {
    memory[dst] = memory[src];
    ++copies;
  });
  auto write = [&](SeqKv* s, const int32_t* t, int n) {  // grow + the forward + commit
    const int at = static_cast<int>(s->tokens.size());
    kv.grow(s, at + n);
    for (int i = 0; i < n; ++i) memory[s->blocks[(at + i) / kBt]][(at + i) % kBt] = t[i];
    kv.commit(s, t, n);
  };
  std::mt19937 rng(7);
  std::vector<Admitted> running;
  int partial = 0, wholes = 0;
  for (int i = 0; i < 1500; ++i) {
    std::vector<int32_t> prompt;  // a small alphabet: prompts often part inside a block
    const int len = 1 + rng() % 14;
    for (int j = 0; j < len; ++j) prompt.push_back(static_cast<int32_t>(rng() % (j < 6 ? 2 : 3)));
    const int conv = rng() % 8;
    const std::vector<int32_t> tail = {static_cast<int32_t>(rng() % 3)};
    AdmitInput in = input(prompt, 4, 64);  // 3 generated tokens fed at most
    in.conversation = "c" + std::to_string(conv);
    in.history_tag = rng() % 2;
    in.tail = &tail;
    in.logits_kept = rng() % 2 == 0;  // the prompt path may then take every token from cache
    Admitted a;
    const AdmitResult r = kv.admit(in, &a);
    ASSERT_NE(r, AdmitResult::kNeverFits);
    if (r == AdmitResult::kAdmitted) {
      const bool whole = in.logits_kept && !a.from_conversation;
      ASSERT_LE(a.n_cached, static_cast<int>(a.prompt.size()) - (whole ? 0 : 1));
      wholes += a.n_cached == static_cast<int>(a.prompt.size());
      for (int p = 0; p < a.n_cached; ++p) {
        ASSERT_EQ(memory[a.kv.blocks[p / kBt]][p % kBt], a.prompt[p]) << "request " << i;
      }
      partial += !a.from_conversation && a.n_cached % kBt != 0;
      running.push_back(std::move(a));
    }
    if (running.empty() || rng() % 3 == 0) continue;
    const size_t k = rng() % running.size();
    Admitted& s = running[k];
    const int n = static_cast<int>(s.prompt.size());
    write(&s.kv, s.prompt.data() + s.n_cached, n - s.n_cached);
    const int gen = static_cast<int>(rng() % 4);
    for (int g = 0; g < gen; ++g) {
      const int32_t t = static_cast<int32_t>(rng() % 3);
      write(&s.kv, &t, 1);
    }
    if (rng() % 2 == 0) {
      kv.save_conversation("c" + std::to_string(rng() % 8), rng() % 2, &s.kv, {});
    } else {
      kv.release(&s.kv);
    }
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
  }
  for (Admitted& s : running) kv.release(&s.kv);
  kv.clear_conversations();
  EXPECT_EQ(kv.allocator().n_used(), 0);
  EXPECT_EQ(kv.allocator().n_reserved(), 0);
  EXPECT_GT(partial, 100);  // the mix really reused partial blocks
  EXPECT_GE(copies, partial);
  EXPECT_GT(wholes, 50);  // and took whole prompts from the cache
}

}  // namespace
}  // namespace glm::kv
