#include "emulation/thread_blocks.h"

#include <fmt/core.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <deque>
#include <exception>
#include <vector>

#include "util/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define LLMS_EMULATION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMS_EMULATION_ASAN 1
#endif
#endif
#if defined(LLMS_EMULATION_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "the emulation's fiber switch (llms_emulation_switch) is written for x86-64"
#endif

// Saves the callee-saved registers on the running stack, stores its stack pointer at *save_sp,
// moves to next_sp and restores the registers saved there (System V x86-64: everything else is
// the caller's to save; MXCSR and the x87 control word are never changed by the kernels).
extern "C" void llms_emulation_switch(void** save_sp, void* next_sp);
asm(R"(
  .text
  .p2align 4
  .globl llms_emulation_switch
  .type llms_emulation_switch, @function
llms_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size llms_emulation_switch, .-llms_emulation_switch
)");

namespace llms::cuda::emulation {

namespace detail {
thread_local const ThreadIndices* current = nullptr;
}

namespace {

constexpr int kWarpSize = 32;
constexpr unsigned kMaxThreads = 1024;
#if defined(LLMS_EMULATION_ASAN)
constexpr size_t kStackBytes = size_t{512} << 10;  // instrumented frames are several times larger
#else
constexpr size_t kStackBytes = size_t{128} << 10;
#endif

// Fiber stacks, kept for the OS thread's life: a launch of 256 threads reuses the first 256. Each
// has an inaccessible page below it, so an overflow faults instead of writing into its neighbour.
class StackPool {
 public:
  ~StackPool() {
    for (char* s : bottoms_) munmap(s - page(), kStackBytes + page());
  }
  // The usable bytes of stack i: [bottom, bottom + kStackBytes).
  char* bottom(size_t i) {
    while (bottoms_.size() <= i) {
      void* p = mmap(nullptr, kStackBytes + page(), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) {
        throw Error(Error::Kind::kUnavailable, "CUDA emulation: no memory for a thread's stack");
      }
      mprotect(p, page(), PROT_NONE);
      bottoms_.push_back(static_cast<char*>(p) + page());
      left_at_.push_back(nullptr);
    }
    return bottoms_[i];
  }
  // Where the last fiber on stack i last switched away (its frames above stay as it left them).
  void*& left_at(size_t i) { return left_at_[i]; }

 private:
  static size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
  std::vector<char*> bottoms_;
  std::vector<void*> left_at_;
};

enum class FiberState { kReady, kWaiting, kDone };

struct Fiber {
  void* sp = nullptr;  // where llms_emulation_switch left it (or the prepared start)
  FiberState state = FiberState::kReady;
  ThreadIndices indices{};
};

// A barrier: the threads waiting at it and how many times it has opened.
struct Barrier {
  std::vector<int> waiting;
  unsigned generation = 0;
};

struct Warp {
  Barrier barrier;
  unsigned lanes = 0;              // kWarpSize, or fewer in a block's last partial warp
  uint64_t slots[2][kWarpSize]{};  // shuffle values, by the barrier's generation parity
};

class BlockRun;
thread_local BlockRun* t_run = nullptr;
thread_local StackPool t_stacks;

[[noreturn]] void fiber_entry();

// One launch's blocks, run one after another by this OS thread (the scheduler), each thread of a
// block on its own fiber.
class BlockRun {
 public:
  BlockRun(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body)
      : kernel_(kernel), grid_(grid), block_(block), body_(body) {
    const unsigned n = block.x * block.y * block.z;
    fibers_.resize(n);
    warps_.resize((n + kWarpSize - 1) / kWarpSize);
    for (size_t w = 0; w < warps_.size(); ++w) {
      warps_[w].lanes = std::min<unsigned>(kWarpSize, n - static_cast<unsigned>(w) * kWarpSize);
    }
    for (unsigned i = 0; i < n; ++i) t_stacks.bottom(i);  // map them before the first block
  }

  void run_block(uint3 block_idx) {
    const auto n = static_cast<int>(fibers_.size());
    for (int i = 0; i < n; ++i) {
      Fiber& f = fibers_[static_cast<size_t>(i)];
      f.state = FiberState::kReady;
      const auto u = static_cast<unsigned>(i);
      f.indices = {{u % block_.x, u / block_.x % block_.y, u / (block_.x * block_.y)},
                   block_idx,
                   block_,
                   grid_};
      f.sp = prepare_stack(static_cast<size_t>(i));
      ready_.push_back(i);
    }
    live_ = n;
    block_barrier_ = Barrier{};
    for (Warp& w : warps_) w.barrier = Barrier{};

    while (!ready_.empty() && !error_) {
      const int i = ready_.front();
      ready_.pop_front();
      resume(i);
    }
    ready_.clear();
    if (error_) std::rethrow_exception(error_);
    if (live_ > 0) {
      size_t at_shuffles = 0;
      for (const Warp& w : warps_) at_shuffles += w.barrier.waiting.size();
      throw Error(
          Error::Kind::kInternal,
          fmt::format("CUDA emulation: kernel {}, block ({}, {}, {}): {} thread(s) wait at "
                      "__syncthreads and {} at a warp shuffle or __syncwarp that the block's other "
                      "threads never reach ({} of {} returned)",
                      kernel_, block_idx.x, block_idx.y, block_idx.z, block_barrier_.waiting.size(),
                      at_shuffles, n - live_, n));
    }
  }

  void sync_threads() { arrive(block_barrier_, static_cast<size_t>(live_)); }

  void sync_warp(unsigned mask) {
    check_whole_warp(mask, "__syncwarp");
    Warp& w = warps_[static_cast<size_t>(running_ / kWarpSize)];
    arrive(w.barrier, w.lanes);
  }

  uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask) {
    check_whole_warp(mask, "__shfl_xor_sync");
    Warp& w = warps_[static_cast<size_t>(running_ / kWarpSize)];
    const int lane = running_ % kWarpSize;
    // Two slot rows by generation: a lane that leaves this shuffle first writes its next value
    // into the other row, so a slower lane still reads this one.
    const unsigned row = w.barrier.generation & 1u;
    w.slots[row][lane] = bits;
    arrive(w.barrier, w.lanes);
    const int from = lane ^ lane_mask;
    return from >= 0 && static_cast<unsigned>(from) < w.lanes ? w.slots[row][from] : bits;
  }

  [[noreturn]] void fiber_main() {
#if defined(LLMS_EMULATION_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_, &scheduler_stack_bytes_);
#endif
    try {
      body_();
    } catch (...) {
      if (!error_) error_ = std::current_exception();
    }
    fibers_[static_cast<size_t>(running_)].state = FiberState::kDone;
    --live_;
    // A returned thread no longer holds __syncthreads back (as on the device).
    if (!block_barrier_.waiting.empty() &&
        block_barrier_.waiting.size() == static_cast<size_t>(live_)) {
      open(block_barrier_);
    }
    suspend(/*finished=*/true);
    __builtin_trap();  // a finished fiber is never resumed
  }

 private:
  // The start of a fiber: llms_emulation_switch pops six registers and returns into fiber_entry
  // with the stack as a call would leave it (16-byte aligned below a return address).
  static void* prepare_stack(size_t i) {
    char* bottom = t_stacks.bottom(i);
    char* top = bottom + kStackBytes;
#if defined(LLMS_EMULATION_ASAN)
    // Frames that never returned on this stack (those of the last switch of the thread that ran
    // on it before, or of a thread abandoned when its block failed) leave their redzones
    // poisoned: clear them before the stack is used again.
    if (void* left = t_stacks.left_at(i); left != nullptr) {
      char* from = std::max(bottom, static_cast<char*>(left) - 1024);
      __asan_unpoison_memory_region(from, static_cast<size_t>(top - from));
    }
#endif
    auto** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;  // fiber_entry's return address: it never returns
    *--sp = reinterpret_cast<void*>(&fiber_entry);
    for (int r = 0; r < 6; ++r) *--sp = nullptr;  // rbp, rbx, r12-r15
    return sp;
  }

  void check_whole_warp(unsigned mask, const char* what) const {
    if (mask != 0xffffffffu) {
      throw Error(Error::Kind::kUnsupported,
                  fmt::format("CUDA emulation: kernel {}: {} with mask {:#x} (only whole warps "
                              "are emulated)",
                              kernel_, what, mask));
    }
  }

  void arrive(Barrier& b, size_t expected) {
    if (b.waiting.size() + 1 >= expected) {
      open(b);
      return;
    }
    b.waiting.push_back(running_);
    fibers_[static_cast<size_t>(running_)].state = FiberState::kWaiting;
    suspend(/*finished=*/false);
  }

  void open(Barrier& b) {
    ++b.generation;
    for (int i : b.waiting) {
      fibers_[static_cast<size_t>(i)].state = FiberState::kReady;
      ready_.push_back(i);
    }
    b.waiting.clear();
  }

  void resume(int i) {
    running_ = i;
    Fiber& f = fibers_[static_cast<size_t>(i)];
    detail::current = &f.indices;
#if defined(LLMS_EMULATION_ASAN)
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, t_stacks.bottom(static_cast<size_t>(i)),
                                   kStackBytes);
#endif
    llms_emulation_switch(&scheduler_sp_, f.sp);
#if defined(LLMS_EMULATION_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
    t_stacks.left_at(static_cast<size_t>(i)) = f.sp;
    running_ = -1;
  }

  void suspend(bool finished) {
    Fiber& f = fibers_[static_cast<size_t>(running_)];
#if defined(LLMS_EMULATION_ASAN)
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(finished ? nullptr : &fake_stack, scheduler_stack_,
                                   scheduler_stack_bytes_);
#else
    (void)finished;
#endif
    llms_emulation_switch(&f.sp, scheduler_sp_);
#if defined(LLMS_EMULATION_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  }

  const char* kernel_;
  dim3 grid_;
  dim3 block_;
  const std::function<void()>& body_;
  std::vector<Fiber> fibers_;
  std::vector<Warp> warps_;
  Barrier block_barrier_;
  std::deque<int> ready_;
  int running_ = -1;
  int live_ = 0;
  void* scheduler_sp_ = nullptr;
  std::exception_ptr error_;
#if defined(LLMS_EMULATION_ASAN)
  const void* scheduler_stack_ = nullptr;
  size_t scheduler_stack_bytes_ = 0;
#endif
};

void fiber_entry() { t_run->fiber_main(); }

BlockRun& running_block(const char* what) {
  if (t_run == nullptr || detail::current == nullptr) {
    throw Error(Error::Kind::kInternal, fmt::format("CUDA emulation: {} outside a kernel", what));
  }
  return *t_run;
}

}  // namespace

void sync_threads() { running_block("__syncthreads").sync_threads(); }

void sync_warp(unsigned mask) { running_block("__syncwarp").sync_warp(mask); }

uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask) {
  return running_block("__shfl_xor_sync").shuffle_xor(mask, bits, lane_mask);
}

void run_grid(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("CUDA emulation: kernel {}: launch of ({}, {}, {}) blocks of ({}, {}, "
                            "{}) threads",
                            kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z));
  }
  if (t_run != nullptr) {
    throw Error(Error::Kind::kInternal,
                fmt::format("CUDA emulation: kernel {} launched from inside a kernel", kernel));
  }
  BlockRun run(kernel, grid, block, body);
  t_run = &run;
  try {
    for (unsigned z = 0; z < grid.z; ++z) {
      for (unsigned y = 0; y < grid.y; ++y) {
        for (unsigned x = 0; x < grid.x; ++x) run.run_block({x, y, z});
      }
    }
  } catch (...) {
    t_run = nullptr;
    detail::current = nullptr;
    throw;
  }
  t_run = nullptr;
  detail::current = nullptr;
}

}  // namespace llms::cuda::emulation
