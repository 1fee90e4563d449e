#include "tokenizer/chat_template/interpreter.h"

#include <algorithm>
#include <memory>

#include "tokenizer/chat_template/error.h"

namespace loom::chat_template {
namespace {

[[noreturn]] void FailUndefined(const Value& u) {
  ThrowRuntime(u.str().empty() ? std::string("undefined value") : u.str());
}

// Python-style index normalisation: negative counts from the end; false when out of range.
bool NormalizeIndex(int64_t* idx, size_t size) {
  if (*idx < 0) *idx += static_cast<int64_t>(size);
  return *idx >= 0 && *idx < static_cast<int64_t>(size);
}

// Python slice indices for a sequence of `size` (step != 0).
std::vector<size_t> SliceIndices(const Value& start_v, const Value& stop_v, const Value& step_v,
                                 size_t size) {
  auto as_opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) {
      ThrowRuntime(std::string("slice ") + what + " must be an integer or None");
    }
    return v.as_int();
  };
  const int64_t n = static_cast<int64_t>(size);
  const int64_t step = as_opt(step_v, "step").value_or(1);
  if (step == 0) ThrowRuntime("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(as_opt(start_v, "start"), step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(as_opt(stop_v, "stop"), step > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(static_cast<size_t>(i));
  }
  return out;
}

}  // namespace

Interpreter::Interpreter(const RenderOptions& options, const Value& context) : options_(options) {
  frames_.emplace_back();
  AddGlobals(&frames_[0].vars);
  if (context.is_object()) {
    for (const auto& [k, v] : context.object().items) {
      if (k.is_string()) Assign(k.str(), v);
    }
  }
}

Interpreter::~Interpreter() {
  for (Value& ns : namespaces_) ns.object().items.clear();
}

void Interpreter::Render(const Body& body, std::string* out) {
  try {
    RenderBody(body, out);
  } catch (TemplateError& e) {
    e.set_pos_if_unknown(pos_);
    throw;
  }
}

void Interpreter::CountIteration() {
  if (++num_iterations_ > options_.max_loop_iterations) {
    throw TemplateError(TemplateError::Kind::kLimit,
                        "template exceeded the loop iteration limit (" +
                            std::to_string(options_.max_loop_iterations) + ")");
  }
}

void Interpreter::CheckSize(size_t num_bytes) const {
  if (static_cast<int64_t>(num_bytes) > options_.max_output_bytes) {
    throw TemplateError(TemplateError::Kind::kLimit, "template output exceeded the size limit (" +
                                                         std::to_string(options_.max_output_bytes) +
                                                         " bytes)");
  }
}

// ----- scopes -----

const Value* Interpreter::Lookup(std::string_view name) const {
  for (size_t i = frames_.size(); i-- > 0;) {
    for (const auto& [k, v] : frames_[i].vars) {
      if (k == name) return &v;
    }
    if (frames_[i].boundary && i > 0) i = 1;  // jump to the root frame
  }
  return nullptr;
}

void Interpreter::Assign(std::string name, Value v) {
  auto& vars = frames_.back().vars;
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(std::move(name), std::move(v));
}

void Interpreter::AssignTargets(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    Assign(targets[0], v);
    return;
  }
  Array items = Iterate(v);
  if (items.size() != targets.size()) {
    ThrowRuntime("cannot unpack " + std::to_string(items.size()) + " values into " +
                 std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) Assign(targets[i], items[i]);
}

std::vector<Interpreter::Frame> Interpreter::SnapshotLocals() const {
  // The frames visible from the top, excluding the root, flattened into one.
  Frame flat;
  flat.boundary = true;
  for (size_t i = frames_.size(); i-- > 1;) {
    for (const auto& [k, v] : frames_[i].vars) {
      const bool shadowed = std::any_of(flat.vars.begin(), flat.vars.end(),
                                        [&](const auto& kv) { return kv.first == k; });
      if (!shadowed) flat.vars.emplace_back(k, v);
    }
    if (frames_[i].boundary) break;
  }
  return {std::move(flat)};
}

// ----- statements -----

Interpreter::Flow Interpreter::RenderBody(const Body& body, std::string* out) {
  for (const NodePtr& n : body) {
    const Flow f = RenderNode(*n, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::RenderNode(const Node& n, std::string* out) {
  pos_ = n.pos;
  switch (n.kind) {
    case Node::Kind::kText:
      out->append(n.text);
      CheckSize(out->size());
      return Flow::kNormal;
    case Node::Kind::kOutput: {
      const Value v = Eval(*n.expr);
      if (v.is_string()) {
        out->append(v.str());
      } else {
        out->append(ToPyStr(v));
      }
      CheckSize(out->size());
      return Flow::kNormal;
    }
    case Node::Kind::kIf:
      for (const auto& [cond, body] : n.branches) {
        pos_ = cond->pos;
        if (Eval(*cond).Truthy()) return RenderBody(body, out);
      }
      return RenderBody(n.else_body, out);
    case Node::Kind::kFor:
      RenderFor(n, out);
      return Flow::kNormal;
    case Node::Kind::kSet:
      if (n.attr_target) {
        const Value target = Eval(*n.attr_target);
        if (!target.is_namespace()) ThrowRuntime("cannot assign attribute on non-namespace object");
        target.object().Set(Value::String(n.text), Eval(*n.expr));
      } else {
        AssignTargets(n.targets, Eval(*n.expr));
      }
      return Flow::kNormal;
    case Node::Kind::kSetBlock: {
      std::string text;
      RenderBody(n.body, &text);
      Value v = Value::String(std::move(text));
      if (n.filter_expr) v = ApplyFilterChain(*n.filter_expr, std::move(v));
      Assign(n.text, std::move(v));
      return Flow::kNormal;
    }
    case Node::Kind::kMacro:
      DefineMacro(n);
      return Flow::kNormal;
    case Node::Kind::kCallBlock: {
      CallArgs args;
      EvalArgs(*n.expr, 1, &args);
      args.keyword.emplace_back("caller", MakeCaller(n));
      const Value fn = Eval(*n.expr->children[0]);
      pos_ = n.pos;
      out->append(ToPyStr(Call(fn, args)));
      CheckSize(out->size());
      return Flow::kNormal;
    }
    case Node::Kind::kFilterBlock: {
      std::string text;
      RenderBody(n.body, &text);
      out->append(ToPyStr(ApplyFilterChain(*n.filter_expr, Value::String(std::move(text)))));
      CheckSize(out->size());
      return Flow::kNormal;
    }
    case Node::Kind::kScope:
      return RenderBody(n.body, out);
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Value Interpreter::ApplyFilterChain(const Expr& chain, Value input) {
  frames_.emplace_back();
  Assign("\x01block", std::move(input));
  Value v = Eval(chain);
  frames_.pop_back();
  return v;
}

void Interpreter::RenderFor(const Node& n, std::string* out) {
  if (n.recursive) ThrowRuntime("recursive for loops are not supported");
  pos_ = n.expr->pos;
  const Value iterable = Eval(*n.expr);
  if (iterable.is_none()) ThrowRuntime("'NoneType' object is not iterable");
  // Lists are iterated in place (`iterable` keeps them alive; the sandbox forbids mutating
  // them); other iterables and filtered loops materialise their items.
  Array materialised;
  const Array* items_ptr = nullptr;
  if (iterable.is_array() && !n.cond) {
    items_ptr = &iterable.array();
  } else {
    materialised = Iterate(iterable);
    items_ptr = &materialised;
  }
  if (n.cond) {  // `for x in xs if cond`: filtered before loop.* is computed
    Array kept;
    for (Value& item : materialised) {
      CountIteration();
      frames_.emplace_back();
      AssignTargets(n.targets, item);
      const bool keep = Eval(*n.cond).Truthy();
      frames_.pop_back();
      if (keep) kept.push_back(std::move(item));
    }
    materialised = std::move(kept);
  }
  const Array& items = *items_ptr;
  if (items.empty()) {
    RenderBody(n.else_body, out);
    return;
  }
  const int64_t length = static_cast<int64_t>(items.size());
  // One loop object, updated in place each iteration (templates never keep it).
  Value loop = Value::MakeObject();
  Object& lo = loop.object();
  lo.items.reserve(12);
  static const char* const kKeys[] = {"index",  "index0",   "revindex", "revindex0",
                                      "first",  "last",     "length",   "depth",
                                      "depth0", "previtem", "nextitem"};
  for (const char* k : kKeys) lo.items.emplace_back(Value::String(k), Value());
  Array cycle_items;
  auto index_ptr = std::make_shared<int64_t>(0);
  lo.items.emplace_back(
      Value::String("cycle"),
      Value::MakeCallable("loop.cycle", [index_ptr](Interpreter&, CallArgs& a) {
        if (a.positional.empty()) ThrowRuntime("no items for cycling given");
        return a.positional[static_cast<size_t>(*index_ptr) % a.positional.size()];
      }));
  for (int64_t i = 0; i < length; ++i) {
    CountIteration();
    *index_ptr = i;
    lo.items[0].second = Value::Int(i + 1);
    lo.items[1].second = Value::Int(i);
    lo.items[2].second = Value::Int(length - i);
    lo.items[3].second = Value::Int(length - i - 1);
    lo.items[4].second = Value::Bool(i == 0);
    lo.items[5].second = Value::Bool(i == length - 1);
    lo.items[6].second = Value::Int(length);
    lo.items[7].second = Value::Int(1);
    lo.items[8].second = Value::Int(0);
    lo.items[9].second =
        i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("there is no previous item");
    lo.items[10].second = i + 1 < length ? items[static_cast<size_t>(i + 1)]
                                         : Value::Undefined("there is no next item");
    frames_.emplace_back();
    Assign("loop", loop);
    AssignTargets(n.targets, items[static_cast<size_t>(i)]);
    const Flow f = RenderBody(n.body, out);
    frames_.pop_back();
    if (f == Flow::kBreak) break;
  }
}

void Interpreter::DefineMacro(const Node& n) {
  const Node* node = &n;
  auto captured = std::make_shared<std::vector<Frame>>(frames_.size() > 1 ? SnapshotLocals()
                                                                          : std::vector<Frame>{});
  Value macro = Value::MakeCallable(n.text, [node, captured](Interpreter& in, CallArgs& args) {
    if (in.call_depth_ >= in.options_.max_call_depth) {
      throw TemplateError(TemplateError::Kind::kLimit,
                          "macro calls nested deeper than " +
                              std::to_string(in.options_.max_call_depth) + " (recursion?)");
    }
    Frame frame = captured->empty() ? Frame{} : (*captured)[0];
    frame.boundary = true;
    const auto& params = node->params;
    if (args.positional.size() > params.size()) {
      ThrowRuntime("macro '" + node->text + "' takes not more than " +
                   std::to_string(params.size()) + " argument(s)");
    }
    in.frames_.push_back(std::move(frame));
    in.call_depth_++;
    std::vector<bool> bound(params.size(), false);
    for (size_t i = 0; i < args.positional.size(); ++i) {
      in.Assign(params[i].name, args.positional[i]);
      bound[i] = true;
    }
    bool has_caller = false;
    for (auto& [k, v] : args.keyword) {
      auto it =
          std::find_if(params.begin(), params.end(), [&](const Param& p) { return p.name == k; });
      if (it != params.end()) {
        bound[static_cast<size_t>(it - params.begin())] = true;
      } else if (k != "caller") {
        in.frames_.pop_back();
        in.call_depth_--;
        ThrowRuntime("macro '" + node->text + "' has no parameter named '" + k + "'");
      }
      has_caller |= k == "caller";
      in.Assign(k, v);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      in.Assign(params[i].name,
                params[i].default_value
                    ? in.Eval(*params[i].default_value)
                    : Value::Undefined("parameter '" + params[i].name + "' was not provided"));
    }
    if (!has_caller) in.Assign("caller", Value::Undefined("no caller"));
    std::string out;
    in.RenderBody(node->body, &out);
    in.frames_.pop_back();
    in.call_depth_--;
    return Value::String(std::move(out));
  });
  Assign(n.text, std::move(macro));
}

Value Interpreter::MakeCaller(const Node& n) {
  const Node* node = &n;
  auto captured = std::make_shared<std::vector<Frame>>(SnapshotLocals());
  return Value::MakeCallable("caller", [node, captured](Interpreter& in, CallArgs& args) {
    Frame frame = (*captured)[0];
    in.frames_.push_back(std::move(frame));
    for (size_t i = 0; i < node->params.size(); ++i) {
      const Param& p = node->params[i];
      if (i < args.positional.size()) {
        in.Assign(p.name, args.positional[i]);
      } else {
        in.Assign(p.name, p.default_value ? in.Eval(*p.default_value) : Value::Undefined());
      }
    }
    std::string out;
    in.RenderBody(node->body, &out);
    in.frames_.pop_back();
    return Value::String(std::move(out));
  });
}

// ----- expressions -----

Value Interpreter::Call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) FailUndefined(fn);
  if (!fn.is_callable())
    ThrowRuntime("'" + std::string(fn.TypeName()) + "' object is not callable");
  return fn.callable().fn(*this, args);
}

void Interpreter::EvalArgs(const Expr& e, size_t first_positional, CallArgs* args) {
  args->positional.reserve(e.children.size() - first_positional);
  for (size_t i = first_positional; i < e.children.size(); ++i) {
    args->positional.push_back(Eval(*e.children[i]));
  }
  for (const auto& [k, v] : e.kwargs) args->keyword.emplace_back(k, Eval(*v));
}

Value Interpreter::EvalCall(const Expr& e) {
  const Value fn = Eval(*e.children[0]);
  CallArgs args;
  EvalArgs(e, 1, &args);
  pos_ = e.pos;
  return Call(fn, args);
}

Value Interpreter::EvalAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      FailUndefined(obj);
    case Value::Kind::kObject: {
      if (!obj.is_namespace()) {
        Value m = GetMethod(obj, name);
        if (!m.is_undefined()) return m;
      }
      if (const Value* v = obj.object().Find(std::string_view(name))) return *v;
      return Value::Undefined("'dict object' has no attribute '" + name + "'");
    }
    default: {
      Value m = GetMethod(obj, name);
      if (!m.is_undefined()) return m;
      return Value::Undefined("'" + std::string(obj.TypeName()) + " object' has no attribute '" +
                              name + "'");
    }
  }
}

Value Interpreter::EvalIndex(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      FailUndefined(obj);
    case Value::Kind::kObject: {
      if (const Value* v = obj.object().Find(key)) return *v;
      if (key.is_string() && !obj.is_namespace()) return EvalAttr(obj, key.str());
      return Value::Undefined("'dict object' has no attribute " + ToPyRepr(key));
    }
    case Value::Kind::kArray:
      if (key.is_int() || key.is_bool()) {
        if (obj.is_generator()) ThrowRuntime("'generator' object is not subscriptable");
        int64_t idx = key.as_int();
        if (!NormalizeIndex(&idx, obj.array().size())) {
          return Value::Undefined("list object has no element " + std::to_string(key.as_int()));
        }
        return obj.array()[static_cast<size_t>(idx)];
      }
      break;
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        const std::vector<size_t> offs = Utf8Offsets(obj.str());
        int64_t idx = key.as_int();
        if (!NormalizeIndex(&idx, offs.size() - 1)) {
          return Value::Undefined("str object has no element " + std::to_string(key.as_int()));
        }
        const auto i = static_cast<size_t>(idx);
        return Value::String(obj.str().substr(offs[i], offs[i + 1] - offs[i]));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return EvalAttr(obj, key.str());
  return Value::Undefined("'" + std::string(obj.TypeName()) + " object' has no element " +
                          ToPyRepr(key));
}

Value Interpreter::EvalSlice(const Expr& e) {
  const Value obj = Eval(*e.children[0]);
  const Value start = e.children[1] ? Eval(*e.children[1]) : Value::None();
  const Value stop = e.children[2] ? Eval(*e.children[2]) : Value::None();
  const Value step = e.children[3] ? Eval(*e.children[3]) : Value::None();
  if (obj.is_undefined()) FailUndefined(obj);
  if (obj.is_array() && !obj.is_generator()) {
    Array out;
    for (size_t i : SliceIndices(start, stop, step, obj.array().size())) {
      out.push_back(obj.array()[i]);
    }
    return Value::MakeArray(std::move(out));
  }
  if (obj.is_string()) {
    const std::vector<size_t> offs = Utf8Offsets(obj.str());
    std::string out;
    for (size_t i : SliceIndices(start, stop, step, offs.size() - 1)) {
      out.append(obj.str(), offs[i], offs[i + 1] - offs[i]);
    }
    return Value::String(std::move(out), obj.is_safe());
  }
  ThrowRuntime("'" + std::string(obj.TypeName()) + "' object is not subscriptable");
}

Value Interpreter::Eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName: {
      if (const Value* v = Lookup(e.name)) return *v;
      return Value::Undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::kAttr: {
      const Value obj = Eval(*e.children[0]);
      pos_ = e.pos;
      return EvalAttr(obj, e.name);
    }
    case Expr::Kind::kIndex: {
      const Value obj = Eval(*e.children[0]);
      const Value key = Eval(*e.children[1]);
      pos_ = e.pos;
      return EvalIndex(obj, key);
    }
    case Expr::Kind::kSlice:
      return EvalSlice(e);
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter: {
      const Value self = Eval(*e.children[0]);
      CallArgs args;
      EvalArgs(e, 1, &args);
      pos_ = e.pos;
      if (e.filter_fn == nullptr) ThrowRuntime("No filter named '" + e.name + "'.");
      return e.filter_fn(*this, self, args);
    }
    case Expr::Kind::kTest: {
      const Value self = Eval(*e.children[0]);
      CallArgs args;
      EvalArgs(e, 1, &args);
      pos_ = e.pos;
      if (e.test_fn == nullptr) ThrowRuntime("No test named '" + e.name + "'.");
      return Value::Bool(e.test_fn(*this, self, args) != e.negated);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      const Value v = Eval(*e.children[0]);
      pos_ = e.pos;
      if (v.is_undefined()) FailUndefined(v);
      if (!v.is_number()) {
        ThrowRuntime("bad operand type for unary " +
                     std::string(e.kind == Expr::Kind::kNeg ? "-" : "+") + ": '" +
                     std::string(v.TypeName()) + "'");
      }
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value::Int(v.as_int()) : v;
      return v.is_float() ? Value::Float(-v.as_double()) : Value::Int(-v.as_int());
    }
    case Expr::Kind::kNot:
      return Value::Bool(!Eval(*e.children[0]).Truthy());
    case Expr::Kind::kAnd: {
      Value l = Eval(*e.children[0]);
      return l.Truthy() ? Eval(*e.children[1]) : l;
    }
    case Expr::Kind::kOr: {
      Value l = Eval(*e.children[0]);
      return l.Truthy() ? l : Eval(*e.children[1]);
    }
    case Expr::Kind::kBinary: {
      const Value l = Eval(*e.children[0]);
      const Value r = Eval(*e.children[1]);
      pos_ = e.pos;
      return BinaryOp(e.name, l, r, *this);
    }
    case Expr::Kind::kConcat: {
      std::string s;
      for (const ExprPtr& c : e.children) {
        const Value v = Eval(*c);
        s += v.is_string() ? v.str() : ToPyStr(v);
        CheckSize(s.size());
      }
      return Value::String(std::move(s));
    }
    case Expr::Kind::kCondition:
      if (Eval(*e.children[0]).Truthy()) return Eval(*e.children[1]);
      return e.children[2] ? Eval(*e.children[2]) : Value::Undefined("conditional has no else");
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      Array items;
      items.reserve(e.children.size());
      for (const ExprPtr& c : e.children) items.push_back(Eval(*c));
      return e.kind == Expr::Kind::kTuple ? Value::MakeTuple(std::move(items))
                                          : Value::MakeArray(std::move(items));
    }
    case Expr::Kind::kDict: {
      Object obj;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = Eval(*e.children[i]);
        if (k.is_array() || k.is_object() || k.is_undefined()) {
          ThrowRuntime("unhashable dict key of type '" + std::string(k.TypeName()) + "'");
        }
        obj.Set(std::move(k), Eval(*e.children[i + 1]));
      }
      return Value::MakeObject(std::move(obj));
    }
  }
  return Value();
}

}  // namespace loom::chat_template
