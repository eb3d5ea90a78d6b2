// sched/step_time_model: what a step costs on this machine and model, learned as it runs.
//
// A step's wall time (schedule, forward pass, sampling, hand-off: what a stream waits between
// two tokens) is modelled as
//   t = t_step + t_prompt * prompt_tokens + t_decode * decode_sequences + t_attend * attended
// where prompt_tokens are the rows that are not a sequence's next token (prefill chunks,
// recomputes, drafts), decode_sequences the sequences computing their next token (each also pays
// the output head and a sampler), and attended the sum over rows of the positions each row
// attends to (a chunk of n tokens after p cached ones attends to n p + n (n + 1) / 2: attention
// grows with the context, the rest does not). On a CPU t_step holds the per-step fixed costs
// (waking the threads, reading the weights when the step is too small to hide it).
//
// Fit: weighted least squares on the steps seen, each weighted by 1 / t^2 (relative error, so a
// 1 s prefill step does not drown the 20 ms decode steps), older steps decaying by kForgetting
// per step so the model follows a machine whose speed changes (other load, thermal limits).
// A decode-only stretch of thousands of steps says nothing about t_prompt; plain forgetting
// would let that estimate drift wherever noise takes it, so every update is also pulled toward
// the previous estimate with the weight of one step (ridge toward the last fit): a term that no
// recent step measured keeps its last value. Coefficients are kept >= 0 (active-set NNLS on the
// 4 x 4 normal equations). Until the first step is seen the model knows nothing (known() is
// false); the first step's time is spread over its tokens, every token costing the same and the
// fixed part as much as four of them, as a starting guess the next steps correct.
#pragma once

#include <array>
#include <cstdint>

namespace llms::sched {

// What a step computes, in the model's terms.
struct StepShape {
  int64_t prompt_tokens = 0;
  int64_t decode_sequences = 0;
  int64_t attended = 0;
  bool empty() const { return prompt_tokens == 0 && decode_sequences == 0; }
};

// The positions a chunk of n tokens after n_cached ones attends to, summed over its rows.
inline int64_t attended_by_chunk(int64_t n_cached, int64_t n) {
  return n * n_cached + n * (n + 1) / 2;
}

struct StepTimeEstimate {
  double step_s = 0.0;
  double prompt_token_s = 0.0;
  double decode_sequence_s = 0.0;
  double attended_token_s = 0.0;
  // Mean |predicted / measured - 1| over recent steps (decaying like the fit); 0 before any.
  double relative_error = 0.0;
  int64_t n_steps = 0;  // steps observed
};

class StepTimeModel {
 public:
  static constexpr double kForgetting = 0.99;  // weight kept per step by older observations

  bool known() const { return n_steps_ > 0; }
  // Seconds the model predicts for a step of this shape (0 while !known()).
  double predict(const StepShape& shape) const;
  // Records a measured step. Steps of no work or a non-positive time are ignored.
  void observe(const StepShape& shape, double seconds);
  StepTimeEstimate estimate() const;

 private:
  static constexpr int kTerms = 4;
  using Vec = std::array<double, kTerms>;
  using Mat = std::array<Vec, kTerms>;
  // Features in units that keep the normal equations well conditioned.
  static Vec features(const StepShape& shape);
  void refit(double ridge);

  Mat xtx_{};              // decayed sum of w x x^T
  Vec xty_{};              // decayed sum of w x y
  Vec theta_{};            // seconds per unit of each scaled feature
  double time_sum_ = 0.0;  // decayed sums of step times and of their count: the time scale
  double weight_sum_ = 0.0;
  double error_sum_ = 0.0;  // decayed sum of |predicted / measured - 1| (from the 2nd step)
  double error_weight_ = 0.0;
  int64_t n_steps_ = 0;
};

}  // namespace llms::sched
