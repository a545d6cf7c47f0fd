#include "scheduler/ngram_draft.h"

#include <gtest/gtest.h>

#include <vector>

namespace glm::scheduler {
namespace {

int32_t next_of(const std::vector<int32_t>& c) {
  return ngram_next(c.data(), static_cast<int>(c.size()));
}

TEST(NgramDraft, TheTokenAfterTheMostRecentEarlierOccurrence) {
  // ... 7 8 [9] ... 7 8 [5] ... 7 8 -> 5 (the most recent)
  EXPECT_EQ(next_of({7, 8, 9, 1, 7, 8, 5, 2, 7, 8}), 5);
  // The longest suffix first: "1 7 8" occurred before 9, "7 8" more recently before 5.
  EXPECT_EQ(next_of({1, 7, 8, 9, 2, 7, 8, 5, 3, 1, 7, 8}), 9);
  // Overlapping repeats: "4 4" followed by 4.
  EXPECT_EQ(next_of({4, 4, 4}), 4);
}

TEST(NgramDraft, NoGuessWithoutARepeatedBigram) {
  EXPECT_EQ(next_of({}), -1);
  EXPECT_EQ(next_of({3}), -1);
  EXPECT_EQ(next_of({1, 2, 3, 4, 5}), -1);
  EXPECT_EQ(next_of({5, 1, 2, 5}), -1);  // a single repeated token is not enough (kNgramMin 2)
}

TEST(NgramDraft, ADraftIsTheGuessRepeatedOverItsOwnGuesses) {
  std::vector<int32_t> c = {1, 2, 3, 4, 5, 9, 1, 2};
  EXPECT_EQ(ngram_draft(&c, 3), 3);
  EXPECT_EQ(c, (std::vector<int32_t>{1, 2, 3, 4, 5, 9, 1, 2, 3, 4, 5}));
  // Each guess equals ngram_next of its context, so a shorter draft is a prefix of a longer.
  std::vector<int32_t> d = {1, 2, 3, 4, 5, 9, 1, 2};
  EXPECT_EQ(ngram_draft(&d, 1), 1);
  EXPECT_EQ(d.back(), 3);
  // The chain goes on past the end of the copied passage (it wraps into the repeat).
  std::vector<int32_t> e = {1, 2, 3, 1, 2};
  EXPECT_EQ(ngram_draft(&e, 4), 4);
  EXPECT_EQ(e, (std::vector<int32_t>{1, 2, 3, 1, 2, 3, 1, 2, 3}));
  std::vector<int32_t> none = {1, 2, 3};
  EXPECT_EQ(ngram_draft(&none, 4), 0);
  EXPECT_EQ(none.size(), 3u);
}

TEST(NgramDraft, DraftLengthGrowsOnHitsShrinksOnMissesAndPauses) {
  DraftLength d(8);
  EXPECT_EQ(d.want(), 4);
  d.verified(4, 4);
  EXPECT_EQ(d.want(), 8);
  d.verified(8, 8);
  EXPECT_EQ(d.want(), 8);  // bounded
  d.verified(8, 2);
  EXPECT_EQ(d.want(), 3);  // the accepted length + 1
  d.verified(2, 2);        // a short draft (no more guesses) accepted whole: no growth
  EXPECT_EQ(d.want(), 3);
  d.verified(3, 0);
  EXPECT_EQ(d.want(), 1);
  d.verified(1, 0);  // a one-token draft missed: pause 1 step
  EXPECT_EQ(d.want(), 0);
  d.idle_step();
  EXPECT_EQ(d.want(), 1);
  d.verified(1, 0);  // again: pause 2
  d.idle_step();
  EXPECT_EQ(d.want(), 0);
  d.idle_step();
  EXPECT_EQ(d.want(), 1);
  d.verified(1, 1);  // a hit ends the back-off and grows
  EXPECT_EQ(d.want(), 2);
  EXPECT_EQ(DraftLength(0).want(), 0);
}

// With a cost (draft passes and each drafted token's share of the verify, in plain decode
// steps), the draft length is the one of the most tokens per cost; when none pays, drafting
// pauses (as after a miss) and the pause ends. Values worked by hand for a = 5/6.
TEST(NgramDraft, DraftLengthWithACostDraftsTheLengthThatPaysBest) {
  DraftLength d(8);
  EXPECT_DOUBLE_EQ(d.acceptance(), 0.5);          // the prior
  for (int i = 0; i < 60; ++i) d.verified(6, 5);  // 5 of 6 verified tokens held each time
  EXPECT_NEAR(d.acceptance(), 5.0 / 6, 1e-4);
  EXPECT_EQ(d.want(), 6);  // free drafts: the plain rule's length (accepted + 1)
  // Cost 1 + 0.25 k: tokens per cost 1.467, 1.685, 1.775, 1.794, 1.774, 1.730 for k = 1..6.
  d.set_cost({0.2, 0.2, 0.05});
  EXPECT_EQ(d.want(), 4);
  EXPECT_NEAR(d.best().second, 1.794, 1e-3);
  // Cost 1 + k (GLM-4.5's block on a small shape: its LM head about a decode step): 0.917 for
  // k = 1, less after: nothing pays. A verified draft that held its first token still pauses.
  d.set_cost({0.8, 0.8, 0.2});
  EXPECT_NEAR(d.best().second, 11.0 / 12, 1e-3);
  d.verified(2, 1);
  EXPECT_EQ(d.want(), 0);
  int idle = 0;
  while (d.want() == 0 && idle < 100) {
    d.idle_step();
    ++idle;
  }
  EXPECT_LE(idle, 16);
  EXPECT_GE(d.want(), 1);
  // Measured, a cost that no acceptance could pay (1 + first + verify >= 2): a long pause.
  d.set_cost({0.9, 0.8, 0.15, /*measured=*/true});
  d.verified(1, 1);
  idle = 0;
  while (d.want() == 0 && idle < 1000) {
    d.idle_step();
    ++idle;
  }
  EXPECT_EQ(idle, 256);
}

}  // namespace
}  // namespace glm::scheduler
