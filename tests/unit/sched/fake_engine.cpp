// The fake engine loop of fake_engine.h: every check it makes is a gtest expectation, so a
// broken step fails the test that ran it.
#include "fake_engine.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kv/step_batch.h"

namespace llms::sched::testing {

std::vector<int32_t> expected_stream(int64_t seq_id, std::vector<int32_t> prompt,
                                     int32_t max_new_tokens) {
  for (int32_t i = 0; i < max_new_tokens; ++i) prompt.push_back(fake_token(seq_id, prompt.size()));
  return prompt;
}

std::vector<int32_t> iota_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

void FakeEngine::add(int64_t seq_id, std::vector<int32_t> prompt, int32_t max_new_tokens,
                     int32_t priority, uint64_t extra_key) {
  Live l;
  l.tokens = prompt;
  l.n_prompt = static_cast<int32_t>(prompt.size());
  l.max_new_tokens = max_new_tokens;
  sched_.add(seq_id, std::move(prompt), max_new_tokens, priority, extra_key);
  live_[seq_id] = std::move(l);
}

void FakeEngine::fork(int64_t parent, int64_t child) {
  sched_.fork(parent, child);
  live_[child] = live_.at(parent);
}

void FakeEngine::abort(int64_t seq_id) {
  sched_.remove(seq_id);
  live_.erase(seq_id);
  EXPECT_FALSE(sched_.has_sequence(seq_id));
  EXPECT_NO_THROW(kv_.check_invariants());
}

void FakeEngine::check_step(const SchedulerOutput& out) {
  const SchedulerConfig& cfg = sched_.config();
  const int32_t bs = kv_.block_size();
  EXPECT_LE(out.n_tokens, cfg.max_num_batched_tokens);
  EXPECT_LE(static_cast<int32_t>(out.scheduled.size()), cfg.max_num_seqs);

  int32_t n_tokens = 0;
  std::set<int64_t> ids;
  std::set<kv::BlockId> written;  // blocks some scheduled sequence writes this step
  kv::StepBatch batch;
  for (const ScheduledSequence& ss : out.scheduled) {
    const std::string where = "sequence " + std::to_string(ss.seq_id);
    EXPECT_TRUE(ids.insert(ss.seq_id).second) << where << " scheduled twice";
    EXPECT_GE(ss.n_new, 1) << where;
    n_tokens += ss.n_new;
    ASSERT_TRUE(live_.count(ss.seq_id)) << where << " is not live";
    const Live& l = live_.at(ss.seq_id);
    const SequenceInfo info = sched_.info(ss.seq_id);
    EXPECT_TRUE(info.is_running) << where;
    EXPECT_EQ(info.n_computed, ss.n_computed_before) << where;
    const int32_t end = ss.n_computed_before + ss.n_new;
    ASSERT_LE(end, static_cast<int32_t>(l.tokens.size())) << where;
    EXPECT_EQ(ss.samples, end == static_cast<int32_t>(l.tokens.size())) << where;
    auto table = kv_.block_table(ss.seq_id);
    ASSERT_GE(static_cast<int64_t>(table.size()), kv_.blocks_for(end)) << where;
    for (int32_t b = ss.n_computed_before / bs; b <= (end - 1) / bs; ++b) {
      EXPECT_TRUE(written.insert(table[static_cast<size_t>(b)]).second)
          << where << " writes block " << table[static_cast<size_t>(b)]
          << " that another sequence also writes this step";
    }
    batch.add_sequence(
        ss.seq_id,
        std::span<const int32_t>(l.tokens).subspan(static_cast<size_t>(ss.n_computed_before),
                                                   static_cast<size_t>(ss.n_new)),
        ss.n_computed_before, table, ss.samples);
  }
  EXPECT_EQ(out.n_tokens, n_tokens);
  EXPECT_NO_THROW(batch.validate(bs, kv_.n_blocks()));

  std::set<kv::BlockId> copy_dsts;
  for (const kv::BlockCopy& c : out.copies) {
    EXPECT_NE(c.src, c.dst);
    EXPECT_TRUE(copy_dsts.insert(c.dst).second) << "block " << c.dst << " copied into twice";
    EXPECT_TRUE(written.count(c.dst)) << "copy into block " << c.dst << " nobody writes";
  }
  for (int64_t id : out.preempted) {
    EXPECT_FALSE(ids.count(id)) << "sequence " << id << " both preempted and scheduled";
    const SequenceInfo info = sched_.info(id);
    EXPECT_FALSE(info.is_running);
    EXPECT_EQ(info.n_computed, 0);
    EXPECT_GE(info.n_preemptions, 1);
  }
  EXPECT_EQ(static_cast<size_t>(sched_.n_running() + sched_.n_waiting()), live_.size());
  for (const auto& [id, l] : live_) {
    auto t = sched_.tokens(id);
    EXPECT_EQ(std::vector<int32_t>(t.begin(), t.end()), l.tokens)
        << "sequence " << id << " lost or changed tokens";
  }
  EXPECT_NO_THROW(kv_.check_invariants());
}

SchedulerOutput FakeEngine::step() {
  SchedulerOutput out = sched_.schedule();
  check_step(out);
  sched_.on_step_done(out);
  std::vector<int64_t> sampled;
  for (const ScheduledSequence& ss : out.scheduled) {
    if (ss.samples) sampled.push_back(ss.seq_id);
  }
  if (fork_hook_) {
    const size_t n = sampled.size();
    for (size_t i = 0; i < n; ++i) {
      for (int64_t child : fork_hook_(sampled[i])) sampled.push_back(child);
    }
  }
  for (int64_t id : sampled) {
    Live& l = live_.at(id);
    const int32_t n_out = static_cast<int32_t>(l.tokens.size()) - l.n_prompt;
    if (n_out < l.max_new_tokens) {
      const int32_t tok = fake_token(id, l.tokens.size());
      sched_.append_token(id, tok);
      l.tokens.push_back(tok);
    }
    if (static_cast<int32_t>(l.tokens.size()) - l.n_prompt >= l.max_new_tokens) {
      finished_[id] = l.tokens;
      sched_.remove(id);
      live_.erase(id);
    }
  }
  EXPECT_NO_THROW(kv_.check_invariants());
  history_.push_back(out);
  return out;
}

int FakeEngine::run_to_completion(int max_steps) {
  int n = 0;
  while (!idle()) {
    if (n >= max_steps) {
      ADD_FAILURE() << "not done after " << max_steps << " steps; " << live_.size() << " left";
      break;
    }
    const SchedulerOutput out = step();
    ++n;
    if (out.empty()) {
      ADD_FAILURE() << "empty step with " << live_.size() << " sequences left";
      break;
    }
  }
  return n;
}

}  // namespace llms::sched::testing
