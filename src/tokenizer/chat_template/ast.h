// The syntax tree of a parsed template: expressions (Expr) and statements (Node). Built by
// Parser, walked by Interpreter; immutable after parsing.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/error.h"
#include "tokenizer/chat_template/value.h"

namespace loom::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// A filter or test implementation: `self` is the operand, `args` the call arguments.
using FilterFn = Value (*)(Interpreter&, const Value& self, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& self, CallArgs& args);

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,  // `literal`
    kName,     // `name`
    kAttr,     // children[0].name  (jinja2 getattr: attribute first, then item)
    kIndex,    // children[0][children[1]]  (item first, then attribute)
    kSlice,    // children[0][children[1]:children[2]:children[3]]; absent parts are null
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs); `filter_fn`
    kTest,     // children[0] is [not] name(children[1..]); `test_fn`, `negated`
    kNeg,      // -children[0]
    kPos,      // +children[0]
    kNot,      // not children[0]
    kBinary,   // children[0] `op` children[1]: + - * / // % ** == != < <= > >= in notin
    kAnd,      // short-circuit, Python value semantics
    kOr,
    kConcat,     // children joined with ~
    kCondition,  // children[1] if children[0] else children[2] (children[2] may be null)
    kList,       // [children...]
    kTuple,      // (children...)
    kDict,       // {children[0]: children[1], ...} (pairs)
  };
  Kind kind;
  SourcePos pos;
  std::string name;  // kName, kAttr, kFilter, kTest; the operator for kBinary
  Value literal;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall / kFilter / kTest
  FilterFn filter_fn = nullptr;  // null: unknown filter in a soft frame (fails when evaluated)
  TestFn test_fn = nullptr;      // likewise
  bool negated = false;
  int32_t height = 1;  // of this subtree (bounded by the parser: evaluation recurses on it)

  Expr(Kind k, SourcePos p) : kind(k), pos(p) {}
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// A macro parameter with its optional default.
struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Node {
  enum class Kind : uint8_t {
    kText,         // `text`
    kOutput,       // {{ expr }}
    kIf,           // branches (cond, body)...; else_body
    kFor,          // for targets in expr [if cond] ... else ...
    kSet,          // set targets = expr | set attr_target.name = expr
    kSetBlock,     // set name %}body{% endset  (filters applied through `filter_expr`)
    kMacro,        // macro name(params) body
    kCallBlock,    // call(params) expr body
    kFilterBlock,  // filter name|... body
    kScope,        // body rendered in place ({% generation %})
    kBreak,
    kContinue,
  };
  Kind kind;
  SourcePos pos;
  std::string text;                  // kText; name of kSetBlock/kMacro; attr name of kSet
  ExprPtr expr;                      // output / for iterable / set value / call expression
  ExprPtr cond;                      // for ... if cond
  ExprPtr attr_target;               // set ns.attr = ... : the `ns` expression
  ExprPtr filter_expr;               // kSetBlock / kFilterBlock: filters over a kLiteral hole
  std::vector<std::string> targets;  // for / set names (more than one: unpacking)
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf
  Body body;
  Body else_body;
  std::vector<Param> params;  // kMacro / kCallBlock
  bool recursive = false;     // for ... recursive

  Node(Kind k, SourcePos p) : kind(k), pos(p) {}
};

}  // namespace loom::chat_template
