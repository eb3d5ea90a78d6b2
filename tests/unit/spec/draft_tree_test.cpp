// spec::DraftModelProposer on a tiny random-weight model drafting for itself: its backlog (the
// tokens its next catch-up computes) and its token trees:
// a tree holds at most max_drafts nodes, parents precede children, its first branch is the chain
// a width-1 proposer drafts (the draft's argmax path) as deep as the tree goes, siblings differ,
// and the tree's keys and values leave the draft cache afterwards (only the known tokens stay).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "spec/draft_model_proposer.h"
#include "spec/speculative_config.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::spec {
namespace {

class DraftTree : public ::testing::Test {
 protected:
  void SetUp() override {
    model::TinyModelSpec spec;
    spec.weight_stddev = 0.3f;
    path_ = dir_.path() / "tiny.gguf";
    model::write_tiny_model(spec, path_);
    file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path_));
    pool_ = std::make_shared<ThreadPool>(2);
  }

  std::unique_ptr<DraftModelProposer> proposer(int32_t width) {
    auto runner = std::make_unique<model::CpuRunner>(*file_, pool_);
    const int32_t n_vocab = runner->n_vocab();
    return std::make_unique<DraftModelProposer>(std::move(runner), 4, 64, kv::KvCacheType::kF16,
                                                n_vocab, 1024, width);
  }

  testing::TempDir dir_;
  std::filesystem::path path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::shared_ptr<ThreadPool> pool_;
};

TEST_F(DraftTree, ATreeExtendsTheChainWithinItsBudget) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int32_t> tokens(static_cast<size_t>(5 + trial * 3));
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
    const int32_t max_drafts = 3 + trial;
    std::vector<ProposalRequest> asks = {{7, tokens, max_drafts}};

    auto chain_proposer = proposer(1);
    std::vector<std::vector<int32_t>> chain;
    chain_proposer->propose(asks, chain);
    ASSERT_EQ(chain[0].size(), static_cast<size_t>(max_drafts));

    for (int32_t width : {2, 4}) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " width " + std::to_string(width));
      auto tree_proposer = proposer(width);
      std::vector<std::vector<int32_t>> drafts;
      std::vector<std::vector<int32_t>> parents;
      tree_proposer->propose_tree(asks, drafts, parents);
      const std::vector<int32_t>& d = drafts[0];
      const std::vector<int32_t>& p = parents[0];
      ASSERT_EQ(d.size(), p.size());
      ASSERT_GE(d.size(), 1u);
      ASSERT_LE(d.size(), static_cast<size_t>(max_drafts));
      std::set<std::pair<int32_t, int32_t>> edges;  // (parent, token): siblings differ
      for (size_t i = 0; i < d.size(); ++i) {
        EXPECT_GE(p[i], -1);
        EXPECT_LT(p[i], static_cast<int32_t>(i));
        EXPECT_TRUE(edges.insert({p[i], d[i]}).second) << "node " << i;
      }
      // The first branch: from the root, always the child holding the chain's next token.
      int32_t node = -1;
      size_t depth = 0;
      for (;;) {
        int32_t next = -1;
        for (size_t i = 0; i < d.size(); ++i) {
          if (p[i] == node && d[i] == chain[0][depth]) next = static_cast<int32_t>(i);
        }
        if (next < 0) break;
        node = next;
        if (++depth == chain[0].size()) break;
      }
      EXPECT_GE(depth, 1u) << "the draft's argmax after the known tokens is in the tree";
      // Only the known tokens stay in the draft cache.
      const auto& kv = tree_proposer->kv_cache();
      EXPECT_EQ(kv.n_blocks() - kv.n_free_blocks(),
                kv.blocks_for(static_cast<int64_t>(tokens.size())));
      kv.check_invariants();
    }
  }
}

TEST_F(DraftTree, TheBacklogIsWhatTheNextCatchUpComputes) {
  auto p = proposer(1);
  std::vector<int32_t> tokens = {5, 9, 14, 3, 77, 21, 8};
  EXPECT_EQ(p->backlog(7, tokens), 7);  // never seen: the whole prompt
  EXPECT_EQ(p->backlog(7, {}), 0);
  std::vector<ProposalRequest> asks = {{7, tokens, 3}};
  std::vector<std::vector<int32_t>> drafts;
  p->propose(asks, drafts);
  ASSERT_EQ(drafts[0].size(), 3u);
  // The draft cache holds the tokens and all drafts but the last (which it never computed).
  // Two drafts kept and a bonus token: those three are behind, the last one always recomputed.
  std::vector<int32_t> next = tokens;
  next.insert(next.end(), {drafts[0][0], drafts[0][1], 200});
  EXPECT_EQ(p->backlog(7, next), 1);
  // The first draft rejected (another token in its place): from there on.
  std::vector<int32_t> other = tokens;
  other.push_back(drafts[0][0] == 1 ? 2 : 1);
  EXPECT_EQ(p->backlog(7, other), 1);
  other.push_back(4);
  EXPECT_EQ(p->backlog(7, other), 2);
  // A sequence it dropped starts over.
  p->remove(7);
  EXPECT_EQ(p->backlog(7, next), static_cast<int64_t>(next.size()));
}

TEST_F(DraftTree, AWidthOutOfRangeIsRefused) {
  EXPECT_THROW(proposer(0), Error);
  EXPECT_THROW(proposer(kMaxDraftTreeWidth + 1), Error);
}

}  // namespace
}  // namespace llms::spec
