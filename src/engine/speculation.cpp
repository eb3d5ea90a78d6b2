// engine/speculation: the Engine's side of speculative decoding: which proposer it builds (and
// the refusals at start: a draft model with another vocabulary or too large for memory), and the
// drafts it asks for after each step (spec::DraftLengthPolicy decides how many). Verification
// happens where the rows are read (Engine::Impl::process_rows, engine.cpp).
#include <fmt/core.h>

#include <algorithm>
#include <exception>

#include "engine_impl.h"
#include "model/cpu_runner.h"
#include "spec/ngram_proposer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/system_memory.h"

namespace llms::engine {

using detail::gib;

namespace {

// The draft model must speak the target's tokenizer: same vocabulary, token for token.
void check_same_vocabulary(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft) {
  const int32_t n = std::min(target.n_vocab(), draft.n_vocab());
  for (int32_t id = 0; id < n; ++id) {
    if (target.token_text(id) != draft.token_text(id)) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("--draft-model: its vocabulary differs from the target's at token "
                              "{} ('{}' in the draft, '{}' in the target)",
                              id, draft.token_text(id), target.token_text(id)));
    }
  }
  if (target.n_vocab() != draft.n_vocab()) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--draft-model: its vocabulary has {} tokens, the target's {}",
                            draft.n_vocab(), target.n_vocab()));
  }
}

}  // namespace

void Engine::Impl::make_proposer(int32_t n_blocks) {
  const spec::SpeculativeConfig& sc = config.speculative;
  if (sc.method == spec::Method::kNgram) {
    proposer = std::make_unique<spec::NgramProposer>(sc.prompt_lookup_min, sc.prompt_lookup_max);
  } else {
    const gguf::GgufFile& draft_file = *config.draft_file;
    const tokenizer::Tokenizer draft_tok = tokenizer::Tokenizer::from_gguf(draft_file);
    check_same_vocabulary(tok, draft_tok);
    // The draft's matrices are copied into memory of their own (as the target's are), and its
    // KV pool has as many blocks as the target's: refuse what cannot fit while nothing runs.
    const int64_t available = available_memory_bytes();
    const auto weights = static_cast<int64_t>(draft_file.file_size());
    if (available > 0 && weights > available) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("--draft-model: its {:.2f} GiB of weights exceed the {:.2f} GiB of "
                              "memory available",
                              gib(weights), gib(available)));
    }
    auto draft_runner = std::make_unique<model::CpuRunner>(draft_file, pool);
    if (draft_runner->n_vocab() < tok.n_vocab()) {
      throw Error(Error::Kind::kInvalidArgument,
                  "--draft-model: its output has fewer rows than the vocabulary");
    }
    if (sc.draft_vocab_size > 0) draft_runner->limit_output_rows(sc.draft_vocab_size);
    const auto kv_bytes = static_cast<int64_t>(
        draft_runner->kv_bytes_per_block(config.block_size, config.kv_cache_dtype,
                                         draft_runner->config().single_kv_layout()) *
        static_cast<size_t>(n_blocks));
    const int64_t left = available_memory_bytes();
    if (left > 0 && kv_bytes > left) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("--draft-model: its KV pool of {:.2f} GiB (as many tokens as the "
                              "target's) exceeds the {:.2f} GiB of memory available",
                              gib(kv_bytes), gib(left)));
    }
    auto draft = std::make_unique<spec::DraftModelProposer>(
        std::move(draft_runner), config.block_size, n_blocks, config.kv_cache_dtype, tok.n_vocab(),
        /*max_tokens_per_pass=*/1024, sc.draft_tree_width);
    draft_proposer = draft.get();
    proposer = std::move(draft);
  }
  draft_policy = std::make_unique<spec::DraftLengthPolicy>(sc, sc.method == spec::Method::kDraft);
  totals.spec_accepted_per_pos.assign(static_cast<size_t>(sc.num_speculative_tokens), 0);
}

// Drafts for every sequence that just got a token and decodes on; the scheduler computes them
// in the next step with the rest.
void Engine::Impl::propose_drafts() {
  std::vector<int64_t>& decoding = decoding_scratch;
  std::vector<spec::ProposalRequest>& asks = asks_scratch;
  std::vector<spec::DraftLengthPolicy::Outlook>& outlook = outlook_scratch;
  decoding.clear();
  asks.clear();
  outlook.clear();
  int64_t n_other_tokens = 0;  // prompt tokens still to compute: the next step's other work
  for (const auto& [seq_id, ref] : seqs) {
    if (!scheduler->has_sequence(seq_id)) continue;
    const sched::SequenceInfo info = scheduler->info(seq_id);
    const std::span<const int32_t> tokens = scheduler->tokens(seq_id);
    if (!info.is_running || info.n_draft != 0 ||
        info.n_computed + 1 != static_cast<int32_t>(tokens.size()) ||
        static_cast<int32_t>(tokens.size()) == info.n_prompt) {
      // Not decoding: prefilling, waiting, or preempted and recomputing.
      n_other_tokens += static_cast<int64_t>(tokens.size()) - info.n_computed;
      continue;
    }
    const Sample& sample = ref.request->samples[static_cast<size_t>(ref.index)];
    decoding.push_back(seq_id);
    int32_t room = ref.request->params.max_tokens - sample.n_generated - 1;
    outlook.push_back({proposer->backlog(seq_id, tokens), std::max(room, 0)});
    const int32_t cap = ref.request->params.num_speculative_tokens;
    if (cap >= 0) room = std::min(room, cap);
    if (room >= 1) asks.push_back(spec::ProposalRequest{seq_id, tokens, room});
  }
  // The next step's prompt tokens: what is pending, as far as the token budget leaves room.
  const int64_t budget_left = std::max<int64_t>(
      config.scheduler.max_num_batched_tokens - static_cast<int64_t>(decoding.size()), 0);
  const int32_t k = draft_policy->choose(
      decoding, static_cast<int32_t>(std::min(n_other_tokens, budget_left)), outlook);
  if (k == 0 || asks.empty()) {
    draft_policy->observe_no_drafts(decoding);
    return;
  }
  for (spec::ProposalRequest& a : asks) a.max_drafts = std::min(a.max_drafts, k);
  std::vector<std::vector<int32_t>>& drafts = proposals_scratch;
  std::vector<std::vector<int32_t>>& parents = parents_scratch;
  try {
    proposer->propose_tree(asks, drafts, parents);
  } catch (const std::exception&) {
    // A proposer that fails costs speed, never output: these sequences decode without drafts
    // (and it forgets their state, which may be half-updated).
    for (const spec::ProposalRequest& a : asks) proposer->remove(a.seq_id);
    return;
  }
  if (draft_proposer) {
    for (const auto& pass : draft_proposer->last_passes()) {
      draft_policy->observe_draft_pass(pass.n_tokens, pass.seconds);
    }
  }
  for (size_t i = 0; i < asks.size(); ++i) {
    if (drafts[i].empty()) continue;
    scheduler->append_draft(asks[i].seq_id, drafts[i]);
    const SeqRef& ref = seqs.at(asks[i].seq_id);
    std::vector<int32_t>& tree = ref.request->samples[static_cast<size_t>(ref.index)].draft_tree;
    tree.clear();
    if (parents[i].empty()) continue;  // a chain
    tree.push_back(-1);
    for (const int32_t p : parents[i]) tree.push_back(p + 1);
  }
}

}  // namespace llms::engine
