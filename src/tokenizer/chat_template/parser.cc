#include "tokenizer/chat_template/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/lexer.h"

namespace loom::chat_template {
namespace {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body ParseAll() {
    Body body = ParseBody({});
    if (Cur().type != T::kEof) Fail("unexpected tag");
    return body;
  }

 private:
  // ----- token helpers -----
  const Token& Cur() const { return toks_[idx_]; }
  const Token& Peek(size_t n = 1) const { return toks_[std::min(idx_ + n, toks_.size() - 1)]; }
  void Advance() {
    if (idx_ + 1 < toks_.size()) ++idx_;
  }
  bool IsOp(std::string_view op) const { return Cur().type == T::kOp && Cur().text == op; }
  bool IsName(std::string_view n) const { return Cur().type == T::kName && Cur().text == n; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(std::string_view n) {
    if (!IsName(n)) return false;
    Advance();
    return true;
  }
  [[noreturn]] void Fail(const std::string& msg) const {
    throw TemplateError(TemplateError::Kind::kSyntax, msg, Cur().pos);
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case T::kEof:
        return "end of template";
      case T::kBlockEnd:
        return "end of statement block";
      case T::kVarEnd:
        return "end of print statement";
      case T::kString:
        return "string";
      case T::kInt:
      case T::kFloat:
        return "number";
      default:
        return "'" + t.text + "'";
    }
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) Fail("expected '" + std::string(op) + "', got " + Describe(Cur()));
  }
  void ExpectBlockEnd() {
    if (Cur().type != T::kBlockEnd) Fail("expected end of statement block, got " + Describe(Cur()));
    Advance();
  }
  std::string ExpectName() {
    if (Cur().type != T::kName) Fail("expected a name, got " + Describe(Cur()));
    std::string n = Cur().text;
    Advance();
    return n;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > kMaxParseDepth) p->Fail("template nesting too deep");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  static ExprPtr MakeExpr(Expr::Kind k, SourcePos pos) { return std::make_unique<Expr>(k, pos); }

  // Sets e->height from its children; fails when the tree gets too tall to evaluate safely.
  ExprPtr Finish(ExprPtr e) {
    int32_t h = 0;
    for (const ExprPtr& c : e->children) {
      if (c) h = std::max(h, c->height);
    }
    for (const auto& kv : e->kwargs) h = std::max(h, kv.second->height);
    e->height = h + 1;
    if (e->height > kMaxExprHeight) Fail("expression too long or nested too deeply");
    return e;
  }

  // ----- statements -----
  // Parses nodes until a block tag whose name is in `ends` (left unconsumed: Cur() is that name).
  Body ParseBody(std::initializer_list<std::string_view> ends) {
    DepthGuard guard(this);
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.type == T::kEof) {
        if (ends.size() == 0) return body;
        Fail("unexpected end of template, expected '" + std::string(*ends.begin()) + "'");
      }
      if (t.type == T::kText) {
        auto n = std::make_unique<Node>(Node::Kind::kText, t.pos);
        n->text = t.text;
        body.push_back(std::move(n));
        Advance();
      } else if (t.type == T::kVarBegin) {
        auto n = std::make_unique<Node>(Node::Kind::kOutput, t.pos);
        Advance();
        n->expr = ParseTuple(true);
        if (Cur().type != T::kVarEnd)
          Fail("expected end of print statement, got " + Describe(Cur()));
        Advance();
        body.push_back(std::move(n));
      } else if (t.type == T::kBlockBegin) {
        const Token& name = Peek();
        if (name.type != T::kName) {
          Advance();
          Fail("expected a statement name, got " + Describe(Cur()));
        }
        for (std::string_view e : ends) {
          if (name.text == e) {
            Advance();
            return body;
          }
        }
        Advance();
        body.push_back(ParseStatement());
      } else {
        Fail("unexpected " + Describe(t));
      }
    }
  }

  // Consumes `{% end... %}` after ParseBody stopped on it.
  void EndBlock() {
    Advance();  // the end name
    ExpectBlockEnd();
  }

  NodePtr ParseStatement() {
    const Token& t = Cur();
    const SourcePos pos = t.pos;
    const std::string kw = t.text;
    Advance();
    if (kw == "if") return ParseIf(pos);
    if (kw == "for") return ParseFor(pos);
    if (kw == "set") return ParseSet(pos);
    if (kw == "macro") return ParseMacro(pos);
    if (kw == "call") return ParseCallBlock(pos);
    if (kw == "filter") {
      auto n = std::make_unique<Node>(Node::Kind::kFilterBlock, pos);
      n->filter_expr = ParseFilterChain(ParseFilter(MakeBlockHole(pos), /*need_pipe=*/false));
      ExpectBlockEnd();
      n->body = ParseBody({"endfilter"});
      EndBlock();
      return n;
    }
    if (kw == "generation") {
      auto n = std::make_unique<Node>(Node::Kind::kScope, pos);
      ExpectBlockEnd();
      n->body = ParseBody({"endgeneration"});
      EndBlock();
      return n;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) Fail("'" + kw + "' outside of a for loop");
      ExpectBlockEnd();
      return std::make_unique<Node>(kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue,
                                    pos);
    }
    idx_ -= 1;
    Fail("unsupported or unknown tag '" + kw + "'");
  }

  NodePtr ParseIf(SourcePos pos) {
    auto n = std::make_unique<Node>(Node::Kind::kIf, pos);
    ++soft_depth_;
    struct Restore {
      int* d;
      ~Restore() { --*d; }
    } restore{&soft_depth_};
    while (true) {
      ExprPtr cond = ParseTuple(true);
      ExpectBlockEnd();
      Body body = ParseBody({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      const std::string which = Cur().text;
      Advance();
      if (which == "elif") continue;
      if (which == "else") {
        ExpectBlockEnd();
        n->else_body = ParseBody({"endif"});
        EndBlock();
      } else {
        ExpectBlockEnd();
      }
      return n;
    }
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> names;
    const bool paren = SkipOp("(");
    do {
      names.push_back(ExpectName());
    } while (SkipOp(","));
    if (paren) ExpectOp(")");
    return names;
  }

  NodePtr ParseFor(SourcePos pos) {
    auto n = std::make_unique<Node>(Node::Kind::kFor, pos);
    n->targets = ParseTargets();
    if (!SkipName("in")) Fail("expected 'in' in for loop, got " + Describe(Cur()));
    n->expr = ParseTuple(false);
    if (SkipName("if")) n->cond = ParseExpression(true);
    if (SkipName("recursive")) n->recursive = true;
    ExpectBlockEnd();
    ++loop_depth_;
    const int saved_soft = std::exchange(soft_depth_, 0);
    n->body = ParseBody({"endfor", "else"});
    soft_depth_ = saved_soft;
    --loop_depth_;
    if (Cur().text == "else") {
      EndBlock();
      n->else_body = ParseBody({"endfor"});
    }
    EndBlock();
    return n;
  }

  NodePtr ParseSet(SourcePos pos) {
    if (Cur().type == T::kName && Peek().type == T::kOp && Peek().text == ".") {
      auto n = std::make_unique<Node>(Node::Kind::kSet, pos);
      n->attr_target = MakeExpr(Expr::Kind::kName, Cur().pos);
      n->attr_target->name = ExpectName();
      ExpectOp(".");
      n->text = ExpectName();
      ExpectOp("=");
      n->expr = ParseTuple(true);
      ExpectBlockEnd();
      return n;
    }
    std::vector<std::string> targets = ParseTargets();
    if (SkipOp("=")) {
      auto n = std::make_unique<Node>(Node::Kind::kSet, pos);
      n->targets = std::move(targets);
      n->expr = ParseTuple(true);
      ExpectBlockEnd();
      return n;
    }
    if (targets.size() != 1) Fail("a block set takes exactly one target");
    auto n = std::make_unique<Node>(Node::Kind::kSetBlock, pos);
    n->text = targets[0];
    if (IsOp("|")) n->filter_expr = ParseFilterChain(MakeBlockHole(pos));
    ExpectBlockEnd();
    n->body = ParseBody({"endset"});
    EndBlock();
    return n;
  }

  std::vector<Param> ParseParams() {
    std::vector<Param> params;
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!params.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      Param p;
      p.name = ExpectName();
      if (SkipOp("=")) p.default_value = ParseExpression(true);
      params.push_back(std::move(p));
    }
    ExpectOp(")");
    return params;
  }

  NodePtr ParseMacro(SourcePos pos) {
    auto n = std::make_unique<Node>(Node::Kind::kMacro, pos);
    n->text = ExpectName();
    n->params = ParseParams();
    ExpectBlockEnd();
    const int saved = std::exchange(loop_depth_, 0);
    const int saved_soft = std::exchange(soft_depth_, 0);
    n->body = ParseBody({"endmacro"});
    loop_depth_ = saved;
    soft_depth_ = saved_soft;
    EndBlock();
    return n;
  }

  NodePtr ParseCallBlock(SourcePos pos) {
    auto n = std::make_unique<Node>(Node::Kind::kCallBlock, pos);
    if (IsOp("(")) n->params = ParseParams();
    n->expr = ParseExpression(true);
    if (n->expr->kind != Expr::Kind::kCall) Fail("expected a call after {% call %}");
    ExpectBlockEnd();
    n->body = ParseBody({"endcall"});
    EndBlock();
    return n;
  }

  static ExprPtr MakeBlockHole(SourcePos pos) {
    auto e = MakeExpr(Expr::Kind::kName, pos);
    e->name = "\x01block";  // not a valid identifier: cannot clash with template names
    return e;
  }

  // ----- expressions (jinja2 precedence, lowest first) -----
  ExprPtr ParseTuple(bool with_condexpr) {
    const SourcePos pos = Cur().pos;
    std::vector<ExprPtr> items;
    bool saw_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!SkipOp(",")) break;
        saw_comma = true;
      }
      if (Cur().type == T::kVarEnd || Cur().type == T::kBlockEnd || IsOp(")") ||
          (IsName("if") && !items.empty()) || (IsName("recursive") && !items.empty())) {
        if (items.empty()) Fail("expected an expression, got " + Describe(Cur()));
        break;
      }
      items.push_back(ParseExpression(with_condexpr));
    }
    if (items.size() == 1 && !saw_comma) return std::move(items[0]);
    auto t = MakeExpr(Expr::Kind::kTuple, pos);  // `a, b` without parentheses
    t->children = std::move(items);
    return t;
  }

  ExprPtr ParseExpression(bool with_condexpr) {
    DepthGuard guard(this);
    return with_condexpr ? ParseCondExpr() : ParseOr();
  }

  ExprPtr ParseCondExpr() {
    ExprPtr expr = ParseOr();
    while (IsName("if")) {
      const SourcePos pos = Cur().pos;
      Advance();
      auto c = MakeExpr(Expr::Kind::kCondition, pos);
      ++soft_depth_;
      ExprPtr test = ParseOr();
      ExprPtr other = SkipName("else") ? ParseCondExpr() : nullptr;
      --soft_depth_;
      c->children.push_back(std::move(test));
      c->children.push_back(std::move(expr));
      c->children.push_back(std::move(other));
      expr = std::move(c);
    }
    return expr;
  }

  ExprPtr Binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, SourcePos pos) {
    auto e = MakeExpr(kind, pos);
    e->name = std::move(op);
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return Finish(std::move(e));
  }

  ExprPtr ParseOr() {
    ExprPtr l = ParseAnd();
    while (IsName("or")) {
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kOr, "or", std::move(l), ParseAnd(), pos);
    }
    return l;
  }

  ExprPtr ParseAnd() {
    ExprPtr l = ParseNot();
    while (IsName("and")) {
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kAnd, "and", std::move(l), ParseNot(), pos);
    }
    return l;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(this);
      auto e = MakeExpr(Expr::Kind::kNot, Cur().pos);
      Advance();
      e->children.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }

  // Chained comparisons (a < b < c) become (a < b) and (b < c), as in Python. The middle
  // operand is needed twice, so it must be a name or a literal (side-effect free).
  ExprPtr ParseCompare() {
    ExprPtr l = ParseMath1();
    ExprPtr result;
    while (true) {
      const SourcePos pos = Cur().pos;
      std::string op;
      if (Cur().type == T::kOp && (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" ||
                                   Cur().text == ">" || Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Advance();
      } else if (IsName("in")) {
        op = "in";
        Advance();
      } else if (IsName("not") && Peek().type == T::kName && Peek().text == "in") {
        op = "notin";
        Advance();
        Advance();
      } else {
        break;
      }
      if (!l) Fail("chained comparisons need a name or literal in the middle");
      ExprPtr r = ParseMath1();
      ExprPtr r_copy = CloneSimple(r.get());
      ExprPtr cmp = Binary(Expr::Kind::kBinary, op, std::move(l), std::move(r), pos);
      result = result ? Binary(Expr::Kind::kAnd, "and", std::move(result), std::move(cmp), pos)
                      : std::move(cmp);
      l = std::move(r_copy);
    }
    return result ? std::move(result) : std::move(l);
  }

  static ExprPtr CloneSimple(const Expr* e) {
    if (e->kind != Expr::Kind::kLiteral && e->kind != Expr::Kind::kName) return nullptr;
    auto c = MakeExpr(e->kind, e->pos);
    c->literal = e->literal;
    c->name = e->name;
    return c;
  }

  ExprPtr ParseMath1() {
    ExprPtr l = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const SourcePos pos = Cur().pos;
      std::string op = Cur().text;
      Advance();
      l = Binary(Expr::Kind::kBinary, op, std::move(l), ParseConcat(), pos);
    }
    return l;
  }

  ExprPtr ParseConcat() {
    ExprPtr first = ParseMath2();
    if (!IsOp("~")) return first;
    auto c = MakeExpr(Expr::Kind::kConcat, Cur().pos);
    c->children.push_back(std::move(first));
    while (SkipOp("~")) c->children.push_back(ParseMath2());
    return Finish(std::move(c));
  }

  ExprPtr ParseMath2() {
    ExprPtr l = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const SourcePos pos = Cur().pos;
      std::string op = Cur().text;
      Advance();
      l = Binary(Expr::Kind::kBinary, op, std::move(l), ParsePow(), pos);
    }
    return l;
  }

  ExprPtr ParsePow() {
    ExprPtr l = ParseUnary(true);
    while (IsOp("**")) {
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kBinary, "**", std::move(l), ParseUnary(true), pos);
    }
    return l;
  }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = MakeExpr(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().pos);
      Advance();
      node->children.push_back(ParseUnary(false));
    } else {
      node = ParsePostfix(ParsePrimary());
    }
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Cur();
    const SourcePos pos = t.pos;
    if (t.type == T::kName) {
      auto e = MakeExpr(Expr::Kind::kLiteral, pos);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      Advance();
      return e;
    }
    if (t.type == T::kString) {
      std::string s;
      while (Cur().type == T::kString) {
        s += Cur().text;
        Advance();
      }
      auto e = MakeExpr(Expr::Kind::kLiteral, pos);
      e->literal = Value::String(std::move(s));
      return e;
    }
    if (t.type == T::kInt || t.type == T::kFloat) {
      auto e = MakeExpr(Expr::Kind::kLiteral, pos);
      e->literal = t.type == T::kInt ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Advance();
      return e;
    }
    if (SkipOp("(")) {
      if (SkipOp(")")) return MakeExpr(Expr::Kind::kTuple, pos);
      ExprPtr e = ParseTuple(true);
      ExpectOp(")");
      return e;
    }
    if (SkipOp("[")) {
      auto e = MakeExpr(Expr::Kind::kList, pos);
      while (!IsOp("]")) {
        if (!e->children.empty()) ExpectOp(",");
        if (IsOp("]")) break;
        e->children.push_back(ParseExpression(true));
      }
      ExpectOp("]");
      return e;
    }
    if (SkipOp("{")) {
      auto e = MakeExpr(Expr::Kind::kDict, pos);
      while (!IsOp("}")) {
        if (!e->children.empty()) ExpectOp(",");
        if (IsOp("}")) break;
        e->children.push_back(ParseExpression(true));
        ExpectOp(":");
        e->children.push_back(ParseExpression(true));
      }
      ExpectOp("}");
      return e;
    }
    Fail("unexpected " + Describe(t));
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    while (true) {
      const SourcePos pos = Cur().pos;
      if (IsOp(".")) {
        Advance();
        if (Cur().type == T::kInt) {
          auto e = MakeExpr(Expr::Kind::kIndex, pos);
          auto idx = MakeExpr(Expr::Kind::kLiteral, pos);
          idx->literal = Value::Int(Cur().int_value);
          Advance();
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(idx));
          node = Finish(std::move(e));
        } else {
          auto e = MakeExpr(Expr::Kind::kAttr, pos);
          e->name = ExpectName();
          e->children.push_back(std::move(node));
          node = Finish(std::move(e));
        }
      } else if (IsOp("[")) {
        Advance();
        node = ParseSubscript(std::move(node), pos);
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr obj, SourcePos pos) {
    ExprPtr parts[3];
    int num_colons = 0;
    while (true) {
      if (IsOp("]")) break;
      if (SkipOp(":")) {
        if (++num_colons > 2) Fail("invalid slice");
        continue;
      }
      if (parts[num_colons]) Fail("expected ':' or ']' in subscript, got " + Describe(Cur()));
      parts[num_colons] = ParseExpression(true);
    }
    ExpectOp("]");
    if (num_colons == 0) {
      if (!parts[0]) Fail("empty subscript");
      auto e = MakeExpr(Expr::Kind::kIndex, pos);
      e->children.push_back(std::move(obj));
      e->children.push_back(std::move(parts[0]));
      return Finish(std::move(e));
    }
    auto e = MakeExpr(Expr::Kind::kSlice, pos);
    e->children.push_back(std::move(obj));
    for (auto& p : parts) e->children.push_back(std::move(p));
    return Finish(std::move(e));
  }

  void ParseCallArgs(Expr* e) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (e->children.size() > 1 || !e->kwargs.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) Fail("*args / **kwargs in calls are not supported");
      if (Cur().type == T::kName && Peek().type == T::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Advance();
        Advance();
        e->kwargs.emplace_back(std::move(key), ParseExpression(true));
      } else {
        if (!e->kwargs.empty()) Fail("positional argument after keyword argument");
        e->children.push_back(ParseExpression(true));
      }
    }
    ExpectOp(")");
  }

  ExprPtr ParseCall(ExprPtr callee) {
    auto e = MakeExpr(Expr::Kind::kCall, callee->pos);
    e->children.push_back(std::move(callee));
    ParseCallArgs(e.get());
    return Finish(std::move(e));
  }

  ExprPtr ParseFilterChain(ExprPtr node) {
    while (IsOp("|")) node = ParseFilter(std::move(node));
    return node;
  }

  // `| name(args)`; {% filter name %} passes need_pipe = false for its first filter.
  ExprPtr ParseFilter(ExprPtr node, bool need_pipe = true) {
    if (need_pipe) ExpectOp("|");
    auto e = MakeExpr(Expr::Kind::kFilter, Cur().pos);
    e->name = ExpectName();
    while (SkipOp(".")) e->name += "." + ExpectName();
    e->filter_fn = FindFilter(e->name);
    if (e->filter_fn == nullptr) {
      if (soft_depth_ == 0) {
        idx_ -= 1;
        Fail("No filter named '" + e->name + "'.");
      }
    }
    e->children.push_back(std::move(node));
    if (IsOp("(")) ParseCallArgs(e.get());
    return Finish(std::move(e));
  }

  ExprPtr ParseTest(ExprPtr node) {
    auto e = MakeExpr(Expr::Kind::kTest, Cur().pos);
    Advance();  // 'is'
    e->negated = SkipName("not");
    e->name = ExpectName();
    while (SkipOp(".")) e->name += "." + ExpectName();
    e->test_fn = FindTest(e->name);
    if (e->test_fn == nullptr) {
      if (soft_depth_ == 0) {
        idx_ -= 1;
        Fail("No test named '" + e->name + "'.");
      }
    }
    e->children.push_back(std::move(node));
    if (IsOp("(")) {
      ParseCallArgs(e.get());
    } else if ((Cur().type == T::kName || Cur().type == T::kString || Cur().type == T::kInt ||
                Cur().type == T::kFloat || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) Fail("You cannot chain multiple tests with is");
      e->children.push_back(ParsePostfix(ParsePrimary()));
    }
    return Finish(std::move(e));
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        node = ParseFilter(std::move(node));
      } else if (IsName("is")) {
        node = ParseTest(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> toks_;
  size_t idx_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  // > 0 inside an {% if %} (condition and branches) or a conditional expression: jinja2
  // compiles these in a "soft" frame where unknown filters/tests fail only when evaluated.
  // Loop, macro and call bodies start a new, hard frame.
  int soft_depth_ = 0;
};

}  // namespace

Body ParseTemplate(std::string_view source) {
  // jinja2 defaults: newline_sequence "\n" (\r\n and \r become \n everywhere) and
  // keep_trailing_newline=False (one final newline is dropped).
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text.push_back(source[i]);
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Parser(Tokenize(text)).ParseAll();
}

}  // namespace loom::chat_template
