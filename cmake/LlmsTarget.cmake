# Common compile settings for every llmserve target.
function(llms_apply_settings target)
  target_compile_options(${target} PRIVATE
                         $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow>)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 reports false -Wrestrict positives inside std::string at -O3 (GCC bug 105329).
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
  endif()
  # CUDA sources (src/cuda): nvcc's own warnings, and the host compiler's on the host code.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(LLMS_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endfunction()

# Sanitizers apply to everything (libraries, tests, fuzzers) so that a finding anywhere fails.
if(LLMS_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()

# llms_module(NAME SOURCES ... DEPS ...): a module library llms_NAME whose public headers live in
# src/NAME/include/NAME/.
function(llms_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(llms_${name} STATIC ${M_SOURCES})
  target_include_directories(llms_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(llms_${name} PUBLIC ${M_DEPS})
  llms_apply_settings(llms_${name})
endfunction()

# Sources of a module are globbed so that adding a file needs no edit here.
function(llms_glob_module name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  llms_module(${name} SOURCES ${sources} DEPS ${M_DEPS})
endfunction()

# With fuzzing on, instrument every library for coverage so libFuzzer can see inside the parsers
# (the fuzz harnesses alone link the fuzzer runtime; ASan's runtime serves the hooks elsewhere).
if(LLMS_FUZZ AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
