// Whether this test binary is built with AddressSanitizer (the asan preset, with UBSan), for the
// few tests that size their work differently there: a sanitizer build runs several times slower
// and reserves terabytes of shadow address space.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define LLMS_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMS_TEST_UNDER_ASAN 1
#endif
#endif

namespace llms::testing {

#if defined(LLMS_TEST_UNDER_ASAN)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif

}  // namespace llms::testing
