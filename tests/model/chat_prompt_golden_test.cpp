// Golden chat-prompt test: tokenizer::encode_chat against Hugging Face on the real model files.
//
// tests/data/chat/prompt_ids.json was made by tools/make_chat_golden.py --model-ids: for every
// conversation of tests/data/chat/conversations.json and every registered model, the ids of
// transformers' apply_chat_template(..., tokenize=True) with the model's own template (or the
// built-in one llmserve picks when the file has none). For ordinary content our ids must be
// exactly HF's; where a message holds control-token text (HF parses it into control tokens
// unless sanitize_control_tokens=True), ours must keep it as text: the same control tokens as
// HF's sanitized ids, and the decoded ids give back the rendered prompt. Templates that refuse a
// conversation must refuse it here too. Skips when the model file is not cached.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "jinja/chat_template.h"
#include "model_dir.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms {
namespace {

using Json = nlohmann::ordered_json;
using tokenizer::Tokenizer;

using testing::model_dir;

std::filesystem::path chat_data_dir() {
#ifdef LLMS_TEST_DATA_DIR
  return std::filesystem::path(LLMS_TEST_DATA_DIR) / "chat";
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "data" / "chat";
#endif
}

Json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

std::string show(const std::vector<int32_t>& ids, size_t from) {
  std::ostringstream os;
  os << "[" << from << ":] ";
  for (size_t i = from; i < ids.size() && i < from + 12; ++i) os << ids[i] << " ";
  return os.str();
}

size_t first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first -
                             a.begin());
}

jinja::ChatInputs chat_inputs(const Json& conv) {
  jinja::ChatInputs in;
  in.messages = conv["messages"];
  if (conv.contains("tools")) in.tools = conv["tools"];
  in.add_generation_prompt = conv.value("add_generation_prompt", false);
  if (conv.contains("extra")) in.extra = conv["extra"];
  return in;
}

struct LoadedModel {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

const LoadedModel& load(const std::string& name) {
  static std::map<std::string, LoadedModel> cache;
  LoadedModel& slot = cache[name];
  if (!slot.file) {
    slot.file = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(model_dir() / name));
    slot.tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*slot.file));
  }
  return slot;
}

class ChatPromptGolden : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(model_dir() / GetParam())) {
      GTEST_SKIP() << (model_dir() / GetParam()) << " not cached (llmserve pull --all)";
    }
    model_ = &load(GetParam());
    for (const Json& conv : read_json(chat_data_dir() / "conversations.json")) {
      conversations_[conv["id"].get<std::string>()] = conv;
    }
    const Json golden = read_json(chat_data_dir() / "prompt_ids.json");
    for (const Json& m : golden["models"]) {
      if (m["file"] == GetParam()) golden_ = m;
    }
    ASSERT_TRUE(golden_.is_object()) << GetParam() << " missing: rerun the script";
    ASSERT_EQ(golden_["cases"].size(), conversations_.size()) << "stale: rerun the script";
  }

  tokenizer::ChatPrompt encode(const Json& conv) const {
    return tokenizer::encode_chat(*model_->file, *model_->tok, chat_inputs(conv));
  }

  const LoadedModel* model_ = nullptr;
  std::map<std::string, Json> conversations_;
  Json golden_;
};

TEST_P(ChatPromptGolden, IdsEqualHfForEveryConversation) {
  const Tokenizer& tok = *model_->tok;
  size_t n_equal = 0;
  size_t n_sanitized = 0;
  size_t n_refused = 0;
  for (const Json& c : golden_["cases"]) {
    const std::string id = c["conversation"];
    SCOPED_TRACE(id);
    const Json& conv = conversations_.at(id);
    if (c.contains("raised")) {
      try {
        encode(conv);
        ADD_FAILURE() << "expected raise_exception(\"" << c["raised"].get<std::string>() << "\")";
      } catch (const jinja::TemplateRaised& e) {
        EXPECT_EQ(std::string(e.what()), c["raised"].get<std::string>());
      }
      ++n_refused;
      continue;
    }
    if (c.contains("error")) {
      EXPECT_THROW(encode(conv), Error) << "HF: " << c["error"].get<std::string>();
      ++n_refused;
      continue;
    }
    const auto hf = c["ids"].get<std::vector<int32_t>>();
    const tokenizer::ChatPrompt ours = encode(conv);
    // HF's ids decode to HF's render, so this compares the two renders.
    EXPECT_EQ(ours.text, tok.decode(hf));
    EXPECT_EQ(tok.decode(ours.ids), ours.text);
    if (!c.contains("ids_sanitized")) {
      EXPECT_EQ(ours.ids, hf) << "first difference at " << first_difference(ours.ids, hf)
                              << "\n  ours " << show(ours.ids, first_difference(ours.ids, hf))
                              << "\n  hf   " << show(hf, first_difference(ours.ids, hf));
      EXPECT_EQ(ours.n_text_specials, 0u);
      n_equal += ours.ids == hf;
      continue;
    }
    // Control-token text in a message: HF (sanitized) and we both keep it as text, so the
    // special tokens of the prompt are the same ones, in the same order.
    const auto sanitized = c["ids_sanitized"].get<std::vector<int32_t>>();
    auto specials = [&](const std::vector<int32_t>& ids) {
      std::vector<int32_t> out;
      std::copy_if(ids.begin(), ids.end(), std::back_inserter(out),
                   [&](int32_t t) { return tok.is_special(t); });
      return out;
    };
    EXPECT_EQ(specials(ours.ids), specials(sanitized));
    EXPECT_LT(specials(ours.ids).size(), specials(hf).size());
    EXPECT_GT(ours.n_text_specials, 0u);
    ++n_sanitized;
  }
  EXPECT_EQ(n_equal + n_sanitized + n_refused, golden_["cases"].size());
  EXPECT_GE(n_equal, 20u);
  std::printf("%s: %zu conversations equal to HF, %zu with control-token text, %zu refused\n",
              GetParam(), n_equal, n_sanitized, n_refused);
}

TEST_P(ChatPromptGolden, TypedEndOfTurnIsNotTheControlToken) {
  const Tokenizer& tok = *model_->tok;
  const std::string end_of_turn =
      tok.kind() == tokenizer::ModelKind::kByteLevelBpe ? "<|im_end|>" : "<end_of_turn>";
  const int32_t end_id = *tok.find_token(end_of_turn);
  ASSERT_TRUE(tok.is_control(end_id));
  auto prompt = [&](const std::string& user) {
    Json conv = {{"messages", Json::array({{{"role", "user"}, {"content", user}}})},
                 {"add_generation_prompt", true}};
    return encode(conv);
  };
  const tokenizer::ChatPrompt plain = prompt("before after");
  const tokenizer::ChatPrompt typed = prompt("before " + end_of_turn + " after");
  const auto n_end = [&](const std::vector<int32_t>& ids) {
    return std::count(ids.begin(), ids.end(), end_id);
  };
  EXPECT_EQ(n_end(typed.ids), n_end(plain.ids));
  EXPECT_EQ(typed.n_text_specials, 1u);
  EXPECT_EQ(tok.decode(typed.ids), typed.text);
  EXPECT_NE(typed.text.find("before " + end_of_turn + " after"), std::string::npos);
  // The message is spelled exactly as plain text would be.
  const auto as_text = tok.encode("before " + end_of_turn + " after",
                                  {.add_special = false, .parse_special = false});
  EXPECT_NE(std::search(typed.ids.begin(), typed.ids.end(), as_text.begin(), as_text.end()),
            typed.ids.end());
}

INSTANTIATE_TEST_SUITE_P(Models, ChatPromptGolden,
                         ::testing::Values("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                                           "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                                           "gemma-3-270m-q4_k_m.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace llms
