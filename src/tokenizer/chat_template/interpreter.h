// Interpreter: renders a parsed template (ast.h) against a context, with jinja2 semantics as
// transformers configures it (sandboxed: list/dict mutators are unsafe; undefined names are
// jinja2's default Undefined). Not thread-safe; create one per render.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/render_options.h"
#include "tokenizer/chat_template/value.h"

namespace loom::chat_template {

class Interpreter {
 public:
  // `context` must be an object; its keys become template variables (shadowing the builtins).
  Interpreter(const RenderOptions& options, const Value& context);
  // Clears every namespace created by the render: namespaces are the only mutable containers
  // (the sandbox freezes lists and dicts), so this breaks any reference cycle through them.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` into `out`. Throws TemplateError; the error carries the line/column of the
  // innermost statement or expression being evaluated.
  void Render(const Body& body, std::string* out);

  // ----- used by the builtins (builtins.cc, methods.cc) -----
  const RenderOptions& options() const { return options_; }
  // Calls a callable value (builtin, macro, bound method). Throws if `fn` is not callable.
  Value Call(const Value& fn, CallArgs& args);
  // Counts one loop iteration against max_loop_iterations.
  void CountIteration();
  // Throws kLimit if a string of `num_bytes` would exceed max_output_bytes.
  void CheckSize(size_t num_bytes) const;
  // Records a namespace() so that the destructor can break cycles through it.
  void RegisterNamespace(const Value& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    bool boundary = false;  // a macro/caller frame: lookups continue at the root frame
  };

  Flow RenderBody(const Body& body, std::string* out);
  Flow RenderNode(const Node& node, std::string* out);
  void RenderFor(const Node& node, std::string* out);
  void DefineMacro(const Node& node);
  Value MakeCaller(const Node& node);
  Value ApplyFilterChain(const Expr& chain, Value input);

  Value Eval(const Expr& e);
  Value EvalAttr(const Value& obj, const std::string& name);
  Value EvalIndex(const Value& obj, const Value& key);
  Value EvalSlice(const Expr& e);
  Value EvalCall(const Expr& e);
  void EvalArgs(const Expr& e, size_t first_positional, CallArgs* args);

  const Value* Lookup(std::string_view name) const;
  void Assign(std::string name, Value v);
  void AssignTargets(const std::vector<std::string>& targets, const Value& v);
  std::vector<Frame> SnapshotLocals() const;

  const RenderOptions& options_;
  std::vector<Frame> frames_;  // frames_[0]: builtins, context and top-level assignments
  SourcePos pos_;              // innermost position being evaluated (for error messages)
  int64_t num_iterations_ = 0;
  int32_t call_depth_ = 0;
  std::vector<Value> namespaces_;
};

// Helpers shared by the builtins.
// Python-like iteration: list items, dict keys, string code points; undefined is empty.
// Throws for other kinds ("'int' object is not iterable").
Array Iterate(const Value& v);
// Python `a < b` for numbers, strings and lists; throws TypeError otherwise.
bool PyLess(const Value& a, const Value& b);
// markupsafe.escape.
std::string HtmlEscape(std::string_view s);
// Registers range, dict, namespace, raise_exception, strftime_now, ... into `vars`.
void AddGlobals(std::vector<std::pair<std::string, Value>>* vars);
// Attribute/method of a value (str/dict/list methods, bound to `self`); undefined if none.
Value GetMethod(const Value& self, std::string_view name);
// The arithmetic/comparison operators of Expr::kBinary.
Value BinaryOp(std::string_view op, const Value& a, const Value& b, const Interpreter& interp);

}  // namespace loom::chat_template
