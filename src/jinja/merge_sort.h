// jinja/merge_sort: a stable merge sort that stays in bounds even when the comparison is not a
// strict weak ordering (NaN, mixed types) or throws. std::sort may read out of bounds with such a
// comparison, and templates control what gets compared.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace llms::jinja {

template <typename T, typename Less>
void merge_sort(std::vector<T>& v, Less less) {
  const size_t n = v.size();
  if (n < 2) return;
  std::vector<T> buf(v.begin(), v.end());
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      const size_t mid = std::min(lo + width, n);
      const size_t hi = std::min(lo + 2 * width, n);
      size_t a = lo;
      size_t b = mid;
      size_t out = lo;
      while (a < mid && b < hi) {
        // Take from the right only when strictly less, which keeps equal elements in order.
        if (less(v[b], v[a])) {
          buf[out++] = v[b++];
        } else {
          buf[out++] = v[a++];
        }
      }
      while (a < mid) buf[out++] = v[a++];
      while (b < hi) buf[out++] = v[b++];
    }
    std::swap(v, buf);
  }
}

}  // namespace llms::jinja
