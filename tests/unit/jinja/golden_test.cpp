// Byte equality with Hugging Face transformers' apply_chat_template on the committed goldens
// (tests/data/chat/golden.json, made by tools/make_chat_golden.py): every template renders every
// conversation of conversations.json exactly as transformers did, or fails the same way.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "jinja/chat_template.h"

namespace llms::jinja {
namespace {

using Json = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kChatDir = std::string(LLMS_TEST_DATA_DIR) + "/chat/";

class ChatGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = Json::parse(read_file(kChatDir + "golden.json"));
    for (const Json& c : Json::parse(read_file(kChatDir + "conversations.json"))) {
      conversations_[c["id"].get<std::string>()] = c;
    }
  }

  Json golden_;
  std::map<std::string, Json> conversations_;
};

TEST_F(ChatGolden, TemplateSourcesAreTheOnesTheGoldensWereMadeFrom) {
  ASSERT_GE(golden_["templates"].size(), 8u);
  for (const auto& [name, t] : golden_["templates"].items()) {
    const std::string origin = t["origin"];
    const std::string source = t["source"];
    if (origin.rfind("builtin:", 0) == 0) {
      EXPECT_EQ(std::string(builtin_chat_template(origin.substr(8))), source)
          << "built-in template " << name << " changed: rerun tools/make_chat_golden.py";
    } else {
      ASSERT_EQ(origin.rfind("file:", 0), 0u) << origin;
      EXPECT_EQ(read_file(kChatDir + origin.substr(5)), source)
          << origin << " changed: rerun tools/make_chat_golden.py";
    }
  }
}

TEST_F(ChatGolden, EveryCaseMatchesTransformersByteForByte) {
  ASSERT_GE(conversations_.size(), 30u);
  const Json& cases = golden_["cases"];
  ASSERT_GE(cases.size(), 200u);
  std::map<std::string, Template> parsed;
  size_t n_outputs = 0, n_raised = 0, n_errors = 0;
  for (const Json& c : cases) {
    const std::string name = c["template"];
    const std::string conv_id = c["conversation"];
    SCOPED_TRACE(name + " / " + conv_id);
    const Json& t = golden_["templates"][name];
    if (!parsed.count(name)) parsed.emplace(name, Template::parse(t["source"].get<std::string>()));
    const Json& conv = conversations_.at(conv_id);

    ChatInputs in;
    in.messages = conv["messages"];
    if (conv.contains("tools")) in.tools = conv["tools"];
    in.add_generation_prompt = conv.value("add_generation_prompt", false);
    if (t["bos_token"].is_string()) in.bos_token = t["bos_token"];
    if (t["eos_token"].is_string()) in.eos_token = t["eos_token"];
    if (conv.contains("extra")) in.extra = conv["extra"];

    if (c.contains("output")) {
      ++n_outputs;
      try {
        EXPECT_EQ(render_chat(parsed.at(name), in), c["output"].get<std::string>());
      } catch (const Error& e) {
        ADD_FAILURE() << "render failed: " << e.what();
      }
    } else if (c.contains("raised")) {
      ++n_raised;
      try {
        render_chat(parsed.at(name), in);
        ADD_FAILURE() << "expected raise_exception(" << c["raised"] << ")";
      } catch (const TemplateRaised& e) {
        EXPECT_EQ(std::string(e.what()), c["raised"].get<std::string>());
      }
    } else {
      ++n_errors;
      EXPECT_THROW(render_chat(parsed.at(name), in), Error) << c["error"];
    }
  }
  EXPECT_GT(n_outputs, 200u);
  EXPECT_GT(n_raised, 0u);
  EXPECT_GT(n_errors, 0u);
}

}  // namespace
}  // namespace llms::jinja
