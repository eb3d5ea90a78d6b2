// Scheduler speculative tokens, driven by hand (no model): append_draft() after a sampled token
// makes the next step compute 1 + k tokens with n_draft = k; accept_draft() keeps a prefix of the
// drafts and rolls the KV table back to exactly what is needed; the refusals of append_draft(),
// append_token() and accept_draft(); drafts dropped when the token budget or the KV blocks cannot
// take them (before any preemption); preemption of a drafted sequence; and the prefix cache,
// which must never register a block holding drafts before they are accepted. The KV manager's
// invariants are checked after every call that changes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "fake_engine.h"
#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"
#include "util/error.h"

namespace llms::sched {
namespace {

using testing::iota_tokens;

SchedulerConfig make_config(int32_t budget, int32_t max_seqs = 8) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_model_len = 4096;
  return c;
}

SchedulerOutput step(Scheduler& sched, kv::KvCacheManager& kv) {
  SchedulerOutput out = sched.schedule();
  kv.check_invariants();
  sched.on_step_done(out);
  kv.check_invariants();
  return out;
}

const ScheduledSequence* find(const SchedulerOutput& out, int64_t seq_id) {
  for (const auto& ss : out.scheduled) {
    if (ss.seq_id == seq_id) return &ss;
  }
  return nullptr;
}

std::vector<int32_t> tokens_of(const Scheduler& sched, int64_t id) {
  auto t = sched.tokens(id);
  return {t.begin(), t.end()};
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void expect_invalid(const std::function<void()>& fn, const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument) << what << ": " << e.what();
  }
}

// Tokens a new sequence would take from the prefix cache (a probe registered with the KV manager
// directly, under an id the scheduler never uses, and freed at once).
int32_t probe_hit(kv::KvCacheManager& kv, const std::vector<int32_t>& tokens) {
  const int32_t n = kv.add_sequence(987654, tokens);
  kv.free(987654);
  kv.check_invariants();
  return n;
}

TEST(SchedulerDraft, DraftsRideWithTheDecodeTokenAndAcceptKeepsAPrefix) {
  for (int32_t n_accepted = 0; n_accepted <= 3; ++n_accepted) {
    SCOPED_TRACE("n_accepted " + std::to_string(n_accepted));
    kv::KvCacheManager kv(64, 4, true);
    Scheduler sched(make_config(64), kv);
    const auto prompt = iota_tokens(10, 100);
    sched.add(1, prompt, 20);
    ASSERT_TRUE(step(sched, kv).scheduled.at(0).samples);
    sched.append_token(1, 500);
    const std::vector<int32_t> drafts = {501, 502, 503};
    sched.append_draft(1, drafts);
    EXPECT_EQ(sched.info(1).n_draft, 3);
    EXPECT_EQ(sched.info(1).n_computed, 10);
    EXPECT_EQ(tokens_of(sched, 1), concat(concat(prompt, {500}), drafts));

    SchedulerOutput out = sched.schedule();
    kv.check_invariants();
    ASSERT_EQ(out.scheduled.size(), 1u);
    const ScheduledSequence ss = out.scheduled[0];
    EXPECT_EQ(ss.n_computed_before, 10);
    EXPECT_EQ(ss.n_new, 4);  // the sampled token and the three drafts
    EXPECT_TRUE(ss.samples);
    EXPECT_EQ(ss.n_draft, 3);
    EXPECT_EQ(out.n_tokens, 4);
    EXPECT_GE(static_cast<int32_t>(kv.block_table(1).size()), kv.blocks_for(14));
    sched.on_step_done(out);
    kv.check_invariants();
    EXPECT_EQ(sched.info(1).n_computed, 14);
    EXPECT_EQ(sched.info(1).n_draft, 3);  // until accept_draft()

    sched.accept_draft(1, n_accepted);
    kv.check_invariants();
    std::vector<int32_t> want = concat(prompt, {500});
    want.insert(want.end(), drafts.begin(), drafts.begin() + n_accepted);
    EXPECT_EQ(tokens_of(sched, 1), want);
    const auto n_kept = static_cast<int32_t>(want.size());
    EXPECT_EQ(sched.info(1).n_computed, n_kept);
    EXPECT_EQ(sched.info(1).n_draft, 0);
    EXPECT_EQ(static_cast<int32_t>(kv.block_table(1).size()), kv.blocks_for(n_kept));
    EXPECT_EQ(kv.n_free_blocks(), kv.n_blocks() - kv.blocks_for(n_kept));

    // Back to plain decoding: the corrected (or bonus) token goes in as usual.
    sched.append_token(1, 600);
    out = step(sched, kv);
    ASSERT_EQ(out.scheduled.size(), 1u);
    EXPECT_EQ(out.scheduled[0].n_computed_before, n_kept);
    EXPECT_EQ(out.scheduled[0].n_new, 1);
    EXPECT_EQ(out.scheduled[0].n_draft, 0);
    EXPECT_TRUE(out.scheduled[0].samples);
    EXPECT_EQ(sched.info(1).n_computed, n_kept + 1);
    sched.remove(1);
    EXPECT_EQ(kv.n_free_blocks(), kv.n_blocks());
  }
}

TEST(SchedulerDraft, ATreesKeptBranchReplacesTheFirstDrafts) {
  kv::KvCacheManager kv(64, 4, true);
  Scheduler sched(make_config(64), kv);
  const auto prompt = iota_tokens(10, 100);
  sched.add(1, prompt, 20);
  step(sched, kv);
  sched.append_token(1, 500);
  // Nodes 501..505 of a tree; the kept branch is 503, 505.
  sched.append_draft(1, std::vector<int32_t>{501, 502, 503, 504, 505});
  step(sched, kv);
  expect_invalid([&] { sched.accept_draft(1, 2, std::vector<int32_t>{503}); },
                 "kept tokens of another count than accepted");
  sched.accept_draft(1, 2, std::vector<int32_t>{503, 505});
  kv.check_invariants();
  EXPECT_EQ(tokens_of(sched, 1), concat(prompt, {500, 503, 505}));
  EXPECT_EQ(sched.info(1).n_computed, 13);
  EXPECT_EQ(static_cast<int32_t>(kv.block_table(1).size()), kv.blocks_for(13));
  sched.remove(1);
  EXPECT_EQ(kv.n_free_blocks(), kv.n_blocks());
}

TEST(SchedulerDraft, AppendDraftNeedsExactlyOneSampledTokenPendingAndNoDrafts) {
  kv::KvCacheManager kv(64, 4, true);
  Scheduler sched(make_config(8), kv);
  const std::vector<int32_t> d2 = {7, 8};
  EXPECT_THROW(sched.append_draft(77, d2), Error);  // unknown

  sched.add(1, iota_tokens(20, 0), 10);
  expect_invalid([&] { sched.append_draft(1, d2); }, "waiting sequence");
  sched.append_draft(1, {});  // empty: nothing happens, whatever the state
  EXPECT_EQ(sched.info(1).n_draft, 0);

  step(sched, kv);  // 8 of 20 prompt tokens
  expect_invalid([&] { sched.append_draft(1, d2); }, "mid-prefill");
  step(sched, kv);
  step(sched, kv);  // all 20 computed, a token sampled but not yet appended
  ASSERT_EQ(sched.info(1).n_computed, 20);
  expect_invalid([&] { sched.append_draft(1, d2); }, "sampled token not appended");
  EXPECT_EQ(tokens_of(sched, 1), iota_tokens(20, 0));

  sched.append_token(1, 50);
  sched.append_draft(1, d2);
  expect_invalid([&] { sched.append_draft(1, std::vector<int32_t>{9}); }, "drafts pending");
  expect_invalid([&] { sched.append_token(1, 51); }, "append_token with drafts pending");
  expect_invalid([&] { sched.accept_draft(1, 3); }, "accept more than drafted");
  expect_invalid([&] { sched.accept_draft(1, -1); }, "accept a negative count");
  EXPECT_EQ(tokens_of(sched, 1), concat(iota_tokens(20, 0), {50, 7, 8}));
  EXPECT_EQ(sched.info(1).n_draft, 2);

  step(sched, kv);
  sched.accept_draft(1, 2);
  kv.check_invariants();
  // Everything computed again: the next draft waits for the next sampled token.
  expect_invalid([&] { sched.append_draft(1, d2); }, "after accept_draft, before append_token");
  sched.append_token(1, 52);
  sched.append_draft(1, d2);
  EXPECT_EQ(sched.info(1).n_draft, 2);
}

TEST(SchedulerDraft, AppendDraftIsRefusedBeforeTheFirstSampledToken) {
  // Chunked prefill leaves exactly one prompt token to compute: n_computed == tokens - 1, but
  // the pending token is a prompt token, not a sampled one.
  kv::KvCacheManager kv(64, 4, true);
  Scheduler sched(make_config(8), kv);
  sched.add(1, iota_tokens(9, 0), 10);
  step(sched, kv);
  ASSERT_EQ(sched.info(1).n_computed, 8);
  expect_invalid([&] { sched.append_draft(1, std::vector<int32_t>{1, 2}); }, "prompt pending");
  EXPECT_EQ(sched.info(1).n_draft, 0);
  EXPECT_EQ(tokens_of(sched, 1), iota_tokens(9, 0));
}

TEST(SchedulerDraft, DraftsMustStayWithinMaxNewTokens) {
  kv::KvCacheManager kv(64, 4, true);
  Scheduler sched(make_config(64), kv);
  sched.add(1, iota_tokens(4, 0), 5);
  step(sched, kv);
  sched.append_token(1, 40);  // 1 of 5 outputs
  expect_invalid([&] { sched.append_draft(1, std::vector<int32_t>{1, 2, 3, 4, 5}); }, "1 + 5 > 5");
  EXPECT_EQ(sched.info(1).n_draft, 0);
  EXPECT_EQ(tokens_of(sched, 1).size(), 5u);
  sched.append_draft(1, std::vector<int32_t>{1, 2, 3, 4});  // 1 + 4 = 5: allowed
  step(sched, kv);
  sched.accept_draft(1, 4);
  kv.check_invariants();
  EXPECT_EQ(tokens_of(sched, 1).size(), 9u);
  expect_invalid([&] { sched.append_token(1, 41); }, "past max_new_tokens");
}

TEST(SchedulerDraft, ABudgetBelowOnePlusKDropsTheDraftsThatDoNotFit) {
  kv::KvCacheManager kv(64, 4, true);
  Scheduler sched(make_config(3), kv);
  sched.add(1, iota_tokens(2, 0), 20);
  step(sched, kv);
  sched.append_token(1, 10);
  sched.append_draft(1, std::vector<int32_t>{11, 12, 13, 14});
  SchedulerOutput out = sched.schedule();
  kv.check_invariants();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].n_new, 3);
  EXPECT_EQ(out.scheduled[0].n_draft, 2);
  EXPECT_TRUE(out.scheduled[0].samples);  // the chunk still reaches the last token
  EXPECT_EQ(sched.info(1).n_draft, 2);
  EXPECT_EQ(tokens_of(sched, 1), (std::vector<int32_t>{0, 1, 10, 11, 12}));
  sched.on_step_done(out);
  sched.accept_draft(1, 2);
  kv.check_invariants();
  EXPECT_EQ(sched.info(1).n_computed, 5);

  // A budget of one token takes no draft at all: a plain decode step, nothing to accept.
  kv::KvCacheManager kv1(64, 4, true);
  Scheduler one(make_config(1), kv1);
  one.add(1, iota_tokens(1, 0), 20);
  step(one, kv1);
  one.append_token(1, 10);
  one.append_draft(1, std::vector<int32_t>{11, 12});
  out = step(one, kv1);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].n_new, 1);
  EXPECT_EQ(out.scheduled[0].n_draft, 0);
  EXPECT_TRUE(out.scheduled[0].samples);
  EXPECT_EQ(one.info(1).n_draft, 0);
  EXPECT_EQ(tokens_of(one, 1), (std::vector<int32_t>{0, 10}));
  one.append_token(1, 20);

  // The budget left after an earlier sequence's decode token.
  kv::KvCacheManager kv2(64, 4, true);
  Scheduler two(make_config(4), kv2);
  two.add(1, iota_tokens(2, 0), 20);
  two.add(2, iota_tokens(2, 50), 20);
  step(two, kv2);
  two.append_token(1, 5);
  two.append_token(2, 55);
  two.append_draft(2, std::vector<int32_t>{56, 57, 58, 59});
  out = step(two, kv2);
  ASSERT_NE(find(out, 1), nullptr);
  ASSERT_NE(find(out, 2), nullptr);
  EXPECT_EQ(find(out, 1)->n_new, 1);
  EXPECT_EQ(find(out, 2)->n_new, 3);
  EXPECT_EQ(find(out, 2)->n_draft, 2);
  EXPECT_TRUE(find(out, 2)->samples);
  EXPECT_EQ(out.n_tokens, 4);
}

TEST(SchedulerDraft, ShortOfBlocksTheDraftsGoBeforeAnyPreemption) {
  // Pool of 4 blocks of 4. Sequence 1 (6 tokens, 2 blocks) and 2 (4 tokens, 1 block) leave one
  // block free. Sequence 1's 6 drafts need 2 more blocks; sequence 2's decode token takes the
  // free one, so of the drafts only the one that fits sequence 1's own last block (position 7)
  // stays, and nobody is preempted.
  kv::KvCacheManager kv(4, 4, true);
  Scheduler sched(make_config(64), kv);
  sched.add(1, iota_tokens(6, 0), 10);
  sched.add(2, iota_tokens(4, 100), 4);
  step(sched, kv);
  ASSERT_EQ(kv.n_free_blocks(), 1);
  sched.append_token(1, 6);
  sched.append_token(2, 104);
  sched.append_draft(1, std::vector<int32_t>{7, 8, 9, 10, 11, 12});
  const SchedulerOutput out = step(sched, kv);
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_EQ(sched.n_preemptions_total(), 0);
  ASSERT_NE(find(out, 1), nullptr);
  ASSERT_NE(find(out, 2), nullptr);
  EXPECT_EQ(find(out, 1)->n_new, 2);
  EXPECT_EQ(find(out, 1)->n_draft, 1);
  EXPECT_EQ(find(out, 2)->n_new, 1);
  EXPECT_EQ(sched.info(1).n_draft, 1);
  EXPECT_EQ(tokens_of(sched, 1), concat(iota_tokens(6, 0), {6, 7}));
  EXPECT_TRUE(sched.info(1).is_running);
  EXPECT_TRUE(sched.info(2).is_running);
}

TEST(SchedulerDraft, ShortOfBlocksKeepsTheDraftsThatFit) {
  // Pool of 5 blocks of 4. Sequence 2 holds 2 blocks while its sampled token is awaited;
  // sequence 1 holds 2 and has 6 drafts: positions 6..12 need 2 more blocks, 1 is free. That
  // block covers positions up to 11, the sampled token and 5 of the drafts.
  kv::KvCacheManager kv(5, 4, true);
  Scheduler sched(make_config(64), kv);
  sched.add(1, iota_tokens(6, 0), 14);
  sched.add(2, iota_tokens(8, 100), 1);
  step(sched, kv);
  ASSERT_EQ(kv.n_free_blocks(), 1);
  sched.append_token(1, 6);
  sched.append_draft(1, std::vector<int32_t>{7, 8, 9, 10, 11, 12});
  const SchedulerOutput out = step(sched, kv);
  EXPECT_TRUE(out.preempted.empty());
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].n_new, 6);
  EXPECT_EQ(out.scheduled[0].n_draft, 5);
  EXPECT_EQ(sched.info(1).n_draft, 5);
  EXPECT_EQ(tokens_of(sched, 1), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(SchedulerDraft, DraftsOfAnEarlierSequenceDoNotPreemptALaterOne) {
  // Pool of 4 blocks of 4, one free after the prompts. Sequence 1's second draft (position 8)
  // would take it; then sequence 2's decode token (position 4) would have no block. Decode tokens
  // come first: sequence 2 gets the block, sequence 1 keeps the draft that fits its own last
  // block (position 7) and drops the other.
  kv::KvCacheManager kv(4, 4, true);
  Scheduler sched(make_config(64), kv);
  sched.add(1, iota_tokens(6, 0), 10);
  sched.add(2, iota_tokens(4, 100), 4);
  step(sched, kv);
  ASSERT_EQ(kv.n_free_blocks(), 1);
  sched.append_token(1, 6);
  sched.append_token(2, 104);
  sched.append_draft(1, std::vector<int32_t>{7, 8});
  const SchedulerOutput out = step(sched, kv);
  EXPECT_TRUE(out.preempted.empty()) << "sequence " << out.preempted.at(0) << " preempted";
  EXPECT_EQ(sched.n_preemptions_total(), 0);
  ASSERT_NE(find(out, 2), nullptr);
  EXPECT_EQ(find(out, 2)->n_new, 1);
  ASSERT_NE(find(out, 1), nullptr);
  EXPECT_EQ(find(out, 1)->n_draft, 1);
  EXPECT_EQ(sched.info(1).n_draft, 1);
  EXPECT_TRUE(sched.info(2).is_running);
}

TEST(SchedulerDraft, PreemptionOfADraftedSequenceDropsItsDrafts) {
  // Pool of 4 blocks of 4, all held after the prompts. Sequence 1's decode token (position 8)
  // needs a block: the victim is sequence 2, the latest arrival, which has drafts.
  kv::KvCacheManager kv(4, 4, true);
  Scheduler sched(make_config(64), kv);
  sched.add(1, iota_tokens(8, 0), 4);
  sched.add(2, iota_tokens(7, 100), 8);
  step(sched, kv);
  ASSERT_EQ(kv.n_free_blocks(), 0);
  sched.append_token(1, 8);
  sched.append_token(2, 107);
  sched.append_draft(2, std::vector<int32_t>{108, 109, 110});
  SchedulerOutput out = step(sched, kv);
  ASSERT_EQ(out.preempted, std::vector<int64_t>{2});
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq_id, 1);
  const std::vector<int32_t> kept = concat(iota_tokens(7, 100), {107});
  EXPECT_EQ(tokens_of(sched, 2), kept);  // the drafts are gone, the sampled token stays
  EXPECT_EQ(sched.info(2).n_draft, 0);
  EXPECT_EQ(sched.info(2).n_computed, 0);
  EXPECT_FALSE(sched.info(2).is_running);
  EXPECT_FALSE(kv.has_sequence(2));

  // Sequence 1 finishes; sequence 2 comes back, recomputes its kept tokens and samples.
  for (int32_t t = 9; t < 11; ++t) {
    sched.append_token(1, t);
    ASSERT_EQ(find(step(sched, kv), 1)->n_new, 1);
  }
  sched.remove(1);
  out = step(sched, kv);
  const ScheduledSequence* ss = find(out, 2);
  ASSERT_NE(ss, nullptr);
  EXPECT_EQ(ss->n_computed_before + ss->n_new, static_cast<int32_t>(kept.size()));
  EXPECT_TRUE(ss->samples);
  EXPECT_EQ(ss->n_draft, 0);
  sched.append_token(2, 108);
  sched.remove(2);
  EXPECT_EQ(kv.n_free_blocks(), kv.n_blocks());
}

TEST(SchedulerDraft, BlocksOfRejectedDraftsNeverServeAsCachedPrefix) {
  kv::KvCacheManager kv(32, 4, true);
  Scheduler sched(make_config(64), kv);
  const auto prompt = iota_tokens(7, 100);
  sched.add(1, prompt, 10);
  step(sched, kv);
  sched.append_token(1, 1000);                                   // position 7 completes block 1
  const std::vector<int32_t> drafts = {2001, 2002, 2003, 2004};  // fill block 2 exactly
  sched.append_draft(1, drafts);
  const std::vector<int32_t> drafted = tokens_of(sched, 1);
  step(sched, kv);
  ASSERT_EQ(sched.info(1).n_computed, 12);
  // Computed but not accepted: block 2 is not in the cache yet.
  EXPECT_EQ(probe_hit(kv, concat(drafted, {1})), 8);

  sched.accept_draft(1, 1);  // 2001 kept, 2002..2004 rejected
  kv.check_invariants();
  EXPECT_EQ(probe_hit(kv, concat(drafted, {1})), 8);
  // New tokens over the rejected positions, computed and committed: block 2 now holds
  // 2001, 3000, 3001, 3002 and is cached under those.
  for (int32_t t : {3000, 3001, 3002}) {
    sched.append_token(1, t);
    step(sched, kv);
  }
  ASSERT_EQ(sched.info(1).n_computed, 12);
  EXPECT_EQ(probe_hit(kv, concat(drafted, {1})), 8);
  EXPECT_EQ(probe_hit(kv, concat(tokens_of(sched, 1), {1})), 12);
}

TEST(SchedulerDraft, AcceptedDraftBlocksAreCached) {
  kv::KvCacheManager kv(32, 4, true);
  Scheduler sched(make_config(64), kv);
  sched.add(1, iota_tokens(7, 100), 10);
  step(sched, kv);
  sched.append_token(1, 1000);
  sched.append_draft(1, std::vector<int32_t>{2001, 2002, 2003, 2004});
  step(sched, kv);
  sched.accept_draft(1, 4);
  kv.check_invariants();
  EXPECT_EQ(probe_hit(kv, concat(tokens_of(sched, 1), {1})), 12);

  // Drafts sharing a block with accepted tokens: prompt 5 (block 1 = prompt[4], the sampled
  // token, two drafts). Not cached while drafted; cached once both drafts are accepted.
  kv::KvCacheManager kv2(32, 4, true);
  Scheduler s2(make_config(64), kv2);
  s2.add(1, iota_tokens(5, 100), 10);
  step(s2, kv2);
  s2.append_token(1, 1000);
  s2.append_draft(1, std::vector<int32_t>{2001, 2002, 2003, 2004});
  step(s2, kv2);
  EXPECT_EQ(probe_hit(kv2, concat(tokens_of(s2, 1), {1})), 4);
  s2.accept_draft(1, 2);
  kv2.check_invariants();
  EXPECT_EQ(tokens_of(s2, 1).size(), 8u);
  EXPECT_EQ(probe_hit(kv2, concat(tokens_of(s2, 1), {1})), 8);
}

}  // namespace
}  // namespace llms::sched
