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

}  // namespace
}  // namespace glm::scheduler
