// jinja/ast: node lifetime. Freeing a tree is iterative (see Expr::~Expr in ast.h).
#include "ast.h"

namespace llms::jinja {

Expr::~Expr() {
  std::vector<ExprPtr> pending;
  const auto detach = [&pending](Expr& e) {
    for (ExprPtr* child : {&e.a, &e.b, &e.c, &e.dyn_args, &e.dyn_kwargs}) {
      if (*child) pending.push_back(std::move(*child));
    }
    for (ExprPtr& child : e.args) {
      if (child) pending.push_back(std::move(child));
    }
    for (Keyword& kw : e.kwargs) {
      if (kw.value) pending.push_back(std::move(kw.value));
    }
  };
  detach(*this);
  while (!pending.empty()) {
    ExprPtr next = std::move(pending.back());
    pending.pop_back();
    detach(*next);
  }  // each node is freed here with no children left
}

}  // namespace llms::jinja
