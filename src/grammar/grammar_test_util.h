// Helpers shared by the grammar tests: table-driven accept / reject cases.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"

namespace loom::grammar_test {

// A grammar source and the strings it must accept / reject as complete documents.
struct GrammarCase {
  std::string source;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

inline std::shared_ptr<const CompiledGrammar> MustCompile(const StatusOr<Grammar>& g) {
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  auto c = CompiledGrammar::Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  // The closures Compile composes equal a plain depth-first walk's at every position; so do
  // their summaries (first bytes, pop) and the closures of the positions of one class.
  const CompiledGrammar& cg = **c;
  const auto n = static_cast<int32_t>(cg.elements().size());
  for (int32_t p = 0; p < n && n <= 20000; ++p) {
    const auto closure = cg.Closure(p);
    if (closure != cg.ReferenceClosure(p)) {
      ADD_FAILURE() << "closure of position " << p << " differs from the depth-first walk's";
      break;
    }
    ByteSet first;
    bool pop = false;
    for (const auto& [pos, chain] : closure) {
      if (pos == CompiledGrammar::kPop) {
        pop = true;
      } else {
        first.AddSet(cg.byte_sets()[cg.elements()[pos].arg]);
      }
    }
    if (first != cg.closure_first_bytes(p) || pop != cg.closure_has_pop(p)) {
      ADD_FAILURE() << "summary of position " << p << " differs from its closure's";
      break;
    }
    const int32_t cls = cg.closure_class(p);
    if (cls == n ? !closure.empty() : (cls > p || cg.Closure(cls) != closure)) {
      ADD_FAILURE() << "position " << p << " is in class " << cls << " with another closure";
      break;
    }
  }
  return *c;
}

// The whole of `s` is a document of `g`. Also checks that feeding it byte by byte agrees with
// AcceptBytes and that a rejected byte leaves the state untouched.
inline bool Matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view s) {
  GrammarMatcher whole(g);
  const bool all = whole.AcceptBytes(s);
  GrammarMatcher bytes(g);
  bool each = true;
  for (char c : s) {
    const size_t before = bytes.Checkpoint();
    if (!bytes.AcceptByte(static_cast<uint8_t>(c))) {
      EXPECT_EQ(bytes.Checkpoint(), before);
      each = false;
      break;
    }
  }
  EXPECT_EQ(all, each) << "AcceptBytes and AcceptByte disagree on \"" << s << "\"";
  if (!all) {
    EXPECT_EQ(whole.Checkpoint(), 1u) << "AcceptBytes is not all-or-nothing";
  }
  return all && whole.IsAccepting();
}

// Runs every case of `cases` through `compile`; returns the number of strings checked.
template <typename Compile>
int RunCases(const std::vector<GrammarCase>& cases, Compile compile) {
  int n = 0;
  for (const GrammarCase& c : cases) {
    SCOPED_TRACE(c.source);
    const auto g = MustCompile(compile(c.source));
    if (g == nullptr) continue;
    for (const std::string& s : c.accept) {
      EXPECT_TRUE(Matches(g, s)) << "should accept: \"" << s << "\"";
      ++n;
    }
    for (const std::string& s : c.reject) {
      EXPECT_FALSE(Matches(g, s)) << "should reject: \"" << s << "\"";
      ++n;
    }
  }
  return n;
}

// `status` is an InvalidArgument whose message contains `fragment`.
inline void ExpectError(const Status& status, std::string_view fragment) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "message \"" << status.message() << "\" lacks \"" << fragment << "\"";
}

}  // namespace loom::grammar_test
