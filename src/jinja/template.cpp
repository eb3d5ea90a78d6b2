// jinja/template: the public entry points, gluing the parser, JSON conversion and interpreter.
#include "jinja/template.h"

#include "ast.h"
#include "interpreter.h"
#include "json_bridge.h"
#include "parser.h"

namespace llms::jinja {

namespace {

template <typename Json>
std::string render_json(const Program& program, const Json& context, const RenderOptions& options) {
  if (!context.is_object()) {
    throw Error(Error::Kind::kInvalidArgument, "template context must be a JSON object");
  }
  Value ctx;
  try {
    ctx = from_json(context);
  } catch (const EvalError& e) {
    throw Error(Error::Kind::kInvalidArgument, std::string("template context: ") + e.what());
  }
  Interpreter interp(options);
  return interp.render(program, ctx);
}

}  // namespace

Template Template::parse(std::string_view source, const ParseOptions& options) {
  auto program = std::make_shared<Program>(parse_program(source, options.max_depth));
  return Template(std::move(program));
}

std::string Template::render(const nlohmann::ordered_json& context,
                             const RenderOptions& options) const {
  return render_json(*program_, context, options);
}

std::string Template::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render_json(*program_, context, options);
}

}  // namespace llms::jinja
