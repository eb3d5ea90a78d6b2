// bench/dataset: random, shared-prefix and JSONL prompt sets (see dataset.h).
//
// Randomness comes from a local splitmix64 stream rather than <random> distributions, whose
// algorithms differ between standard libraries: the same seed builds the same prompts everywhere.
#include "bench/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace llms::bench {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform integer in [lo, hi] (inclusive); the modulo bias is irrelevant at these sizes.
int64_t uniform_int(uint64_t& state, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(splitmix64(state) % span);
}

int64_t draw_length(const LengthSpec& spec, uint64_t& state) {
  const double m = static_cast<double>(spec.mean);
  const int64_t lo = std::max<int64_t>(1, std::llround(m * (1.0 - spec.range_ratio)));
  const int64_t hi = std::max<int64_t>(lo, std::llround(m * (1.0 + spec.range_ratio)));
  return uniform_int(state, lo, hi);
}

void check_length(const LengthSpec& spec, const char* name) {
  if (spec.mean < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                std::string(name) + " must be >= 1 token, got " + std::to_string(spec.mean));
  }
  if (!(spec.range_ratio >= 0 && spec.range_ratio < 1)) {
    throw Error(Error::Kind::kInvalidArgument, std::string(name) +
                                                   " range ratio must be in [0, 1), got " +
                                                   std::to_string(spec.range_ratio));
  }
}

std::string_view random_word(uint64_t& state, bool short_only) {
  const auto& words = word_list();
  for (;;) {
    std::string_view w = words[splitmix64(state) % words.size()];
    if (!short_only || w.size() <= 3) return w;
  }
}

// Words appended after `base`, separated by single spaces.
std::string join_words(const std::string& base, const std::vector<std::string_view>& words,
                       size_t k) {
  std::string text = base;
  for (size_t i = 0; i < k; ++i) {
    if (!text.empty() && text.back() != ' ' && text.back() != '\n') text.push_back(' ');
    text.append(words[i]);
  }
  return text;
}

int64_t count_or_throw(const TokenCounter& counter, const std::string& text, int& n_calls) {
  ++n_calls;
  auto n = counter(text);
  if (!n) throw Error(Error::Kind::kIo, "tokenize: the token counter gave no answer");
  return *n;
}

void shuffle(std::vector<Prompt>& prompts, uint64_t& state) {
  for (size_t i = prompts.size(); i > 1; --i) {
    const size_t j = splitmix64(state) % i;
    std::swap(prompts[i - 1], prompts[j]);
  }
}

std::string exactness_note(const std::vector<Prompt>& prompts, size_t n_inexact, int64_t max_off) {
  if (n_inexact == 0) return "";
  return "; " + std::to_string(n_inexact) + " of " + std::to_string(prompts.size()) +
         " prompts could not be hit exactly (off by up to " + std::to_string(max_off) + " tokens)";
}

}  // namespace

const std::vector<std::string_view>& word_list() {
  static const std::vector<std::string_view> kWords = {
      "the",       "of",      "and",    "to",      "in",        "is",        "you",     "that",
      "it",        "he",      "was",    "for",     "on",        "are",       "as",      "with",
      "his",       "they",    "at",     "be",      "this",      "have",      "from",    "or",
      "one",       "had",     "by",     "word",    "but",       "not",       "what",    "all",
      "were",      "we",      "when",   "your",    "can",       "said",      "there",   "use",
      "an",        "each",    "which",  "she",     "do",        "how",       "their",   "if",
      "will",      "up",      "other",  "about",   "out",       "many",      "then",    "them",
      "these",     "so",      "some",   "her",     "would",     "make",      "like",    "him",
      "into",      "time",    "has",    "look",    "two",       "more",      "write",   "go",
      "see",       "number",  "no",     "way",     "could",     "people",    "my",      "than",
      "first",     "water",   "been",   "call",    "who",       "oil",       "its",     "now",
      "find",      "long",    "down",   "day",     "did",       "get",       "come",    "made",
      "may",       "part",    "over",   "new",     "sound",     "take",      "only",    "little",
      "work",      "know",    "place",  "year",    "live",      "me",        "back",    "give",
      "most",      "very",    "after",  "thing",   "our",       "just",      "name",    "good",
      "man",       "think",   "say",    "great",   "where",     "help",      "through", "much",
      "before",    "line",    "right",  "too",     "mean",      "old",       "any",     "same",
      "tell",      "boy",     "follow", "came",    "want",      "show",      "also",    "around",
      "form",      "three",   "small",  "set",     "put",       "end",       "does",    "another",
      "well",      "large",   "must",   "big",     "even",      "such",      "because", "turn",
      "here",      "why",     "ask",    "went",    "men",       "read",      "need",    "land",
      "different", "home",    "us",     "move",    "try",       "kind",      "hand",    "picture",
      "again",     "change",  "off",    "play",    "spell",     "air",       "away",    "animal",
      "house",     "point",   "page",   "letter",  "mother",    "answer",    "found",   "study",
      "still",     "learn",   "should", "world",   "high",      "every",     "near",    "add",
      "food",      "between", "own",    "below",   "country",   "plant",     "last",    "school",
      "father",    "keep",    "tree",   "never",   "start",     "city",      "earth",   "eye",
      "light",     "thought", "head",   "under",   "story",     "saw",       "left",    "few",
      "while",     "along",   "might",  "close",   "something", "seem",      "next",    "hard",
      "open",      "example", "begin",  "life",    "always",    "those",     "both",    "paper",
      "together",  "got",     "group",  "often",   "run",       "important", "until",   "children",
      "side",      "feet",    "car",    "mile",    "night",     "walk",      "white",   "sea",
      "began",     "grow",    "took",   "river",   "four",      "carry",     "state",   "once",
      "book",      "hear",    "stop",   "without", "second",    "later",
  };
  return kWords;
}

GrownText grow_to_tokens(const std::string& base, int64_t target, uint64_t& rng_state,
                         const TokenCounter& counter) {
  GrownText out;
  std::vector<std::string_view> words;
  auto ensure = [&](size_t k) {
    while (words.size() < k) words.push_back(random_word(rng_state, false));
  };
  if (!counter) {
    // Approximation: one word, one token; the base counts one token per space-separated word.
    int64_t base_words = 0;
    std::istringstream in(base);
    for (std::string w; in >> w;) ++base_words;
    const size_t k = static_cast<size_t>(std::max<int64_t>(0, target - base_words));
    ensure(k);
    out.text = join_words(base, words, k);
    out.tokens = base_words + static_cast<int64_t>(k);
    return out;
  }
  constexpr int kMaxCalls = 40;
  const int64_t base_count = count_or_throw(counter, base, out.n_counter_calls);
  out.text = base;
  out.tokens = base_count;
  if (base_count >= target) {
    out.exact = base_count == target;
    return out;
  }
  // Invariant: text(lo) has fewer tokens than the target; text(hi), when known, has more.
  size_t lo = 0;
  constexpr size_t kUnknown = SIZE_MAX;
  size_t hi = kUnknown;
  size_t k = static_cast<size_t>(target - base_count);
  while (out.n_counter_calls < kMaxCalls) {
    ensure(k);
    std::string text = join_words(base, words, k);
    const int64_t c = count_or_throw(counter, text, out.n_counter_calls);
    if (std::llabs(c - target) < std::llabs(out.tokens - target) ||
        (std::llabs(c - target) == std::llabs(out.tokens - target) && c < out.tokens)) {
      out.text = text;
      out.tokens = c;
    }
    if (c == target) {
      out.exact = true;
      return out;
    }
    if (c < target) {
      lo = k;
    } else {
      hi = k;
    }
    if (hi != kUnknown && hi == lo + 1) {
      // The word at index lo jumps past the target: swap it for a short word and search on.
      words[lo] = random_word(rng_state, true);
      hi = kUnknown;
      k = lo + 1;
      continue;
    }
    // Step by the token shortfall (about one token per word), bisecting once bracketed.
    size_t next = c < target ? k + static_cast<size_t>(target - c)
                             : k - std::min(k, static_cast<size_t>(c - target));
    if (next <= lo || (hi != kUnknown && next >= hi)) {
      next = hi != kUnknown ? lo + (hi - lo) / 2 : lo + 1;
    }
    if (next <= lo) next = lo + 1;
    k = next;
  }
  return out;
}

Dataset make_random_dataset(const RandomSpec& spec, const TokenCounter& counter,
                            std::string_view counter_name) {
  check_length(spec.input, "input length");
  check_length(spec.output, "output length");
  if (spec.n_prompts == 0) throw Error(Error::Kind::kInvalidArgument, "number of prompts is 0");
  Dataset ds;
  ds.kind = "random";
  uint64_t state = spec.seed ^ 0x5EED0001ull;
  size_t n_inexact = 0;
  int64_t max_off = 0;
  for (size_t i = 0; i < spec.n_prompts; ++i) {
    Prompt p;
    const int64_t n_in = draw_length(spec.input, state);
    p.max_tokens = draw_length(spec.output, state);
    GrownText g = grow_to_tokens("", n_in, state, counter);
    p.text = std::move(g.text);
    if (counter) {
      p.input_tokens = g.tokens;
      if (!g.exact) {
        ++n_inexact;
        max_off = std::max<int64_t>(max_off, std::llabs(g.tokens - n_in));
      }
    }
    ds.prompts.push_back(std::move(p));
  }
  ds.token_exact = counter && n_inexact == 0;
  ds.length_source = std::string(counter_name) + exactness_note(ds.prompts, n_inexact, max_off);
  return ds;
}

Dataset make_shared_prefix_dataset(const SharedPrefixSpec& spec, const TokenCounter& counter,
                                   std::string_view counter_name) {
  if (spec.n_groups == 0 || spec.n_questions == 0) {
    throw Error(Error::Kind::kInvalidArgument, "shared-prefix: groups and questions must be >= 1");
  }
  check_length({spec.prefix_tokens, 0}, "prefix length");
  check_length({spec.question_tokens, 0}, "question length");
  check_length({spec.output_tokens, 0}, "output length");
  Dataset ds;
  ds.kind = "shared-prefix";
  uint64_t state = spec.seed ^ 0x5EED0002ull;
  size_t n_inexact = 0;
  int64_t max_off = 0;
  auto note = [&](const GrownText& g, int64_t target) {
    if (counter && !g.exact) {
      ++n_inexact;
      max_off = std::max<int64_t>(max_off, std::llabs(g.tokens - target));
    }
  };
  for (size_t g = 0; g < spec.n_groups; ++g) {
    GrownText prefix = grow_to_tokens("", spec.prefix_tokens, state, counter);
    note(prefix, spec.prefix_tokens);
    const std::string base = prefix.text + "\n";
    // The separator may itself be a token: aim at the prefix's own count plus the question.
    const int64_t target = prefix.tokens + spec.question_tokens;
    for (size_t q = 0; q < spec.n_questions; ++q) {
      GrownText full = grow_to_tokens(base, target, state, counter);
      note(full, target);
      Prompt p;
      p.text = std::move(full.text);
      p.max_tokens = spec.output_tokens;
      if (counter) p.input_tokens = full.tokens;
      ds.prompts.push_back(std::move(p));
    }
  }
  shuffle(ds.prompts, state);
  ds.token_exact = counter && n_inexact == 0;
  ds.length_source = std::string(counter_name) + exactness_note(ds.prompts, n_inexact, max_off);
  return ds;
}

Dataset parse_jsonl_dataset(std::string_view text, std::string_view name,
                            int64_t default_max_tokens) {
  Dataset ds;
  ds.kind = "jsonl";
  ds.length_source = "usage reported by the server";
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::string where = std::string(name) + ":" + std::to_string(line_no) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      throw Error(Error::Kind::kInvalidArgument, where + "not a JSON object");
    }
    Prompt p;
    p.max_tokens = default_max_tokens;
    if (auto it = j.find("messages"); it != j.end()) {
      if (!it->is_array() || it->empty()) {
        throw Error(Error::Kind::kInvalidArgument,
                    where + "\"messages\" must be a non-empty array");
      }
      for (const auto& m : *it) {
        if (!m.is_object() || !m.contains("role")) {
          throw Error(Error::Kind::kInvalidArgument,
                      where + "every message must be an object with a \"role\"");
        }
      }
      p.messages = *it;
    } else {
      auto pt = j.find("prompt");
      if (pt == j.end()) pt = j.find("text");
      if (pt == j.end() || !pt->is_string()) {
        throw Error(Error::Kind::kInvalidArgument,
                    where + "needs a string \"prompt\" (or \"text\") or a \"messages\" array");
      }
      p.text = pt->get<std::string>();
    }
    for (const char* key : {"max_tokens", "output_len"}) {
      if (auto it = j.find(key); it != j.end()) {
        if (!it->is_number_integer() || it->get<int64_t>() < 1) {
          throw Error(Error::Kind::kInvalidArgument,
                      where + "\"" + key + "\" must be an integer >= 1");
        }
        p.max_tokens = it->get<int64_t>();
      }
    }
    ds.prompts.push_back(std::move(p));
  }
  if (ds.prompts.empty()) {
    throw Error(Error::Kind::kInvalidArgument, std::string(name) + ": no prompts in the file");
  }
  return ds;
}

Dataset load_jsonl_dataset(const std::string& path, int64_t default_max_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Error::Kind::kNotFound, path + ": cannot open the JSONL dataset");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_jsonl_dataset(buf.str(), path, default_max_tokens);
}

}  // namespace llms::bench
