// Hostile inputs: invalid UTF-8, 10 MB inputs, deep nesting, runaway templates, and a fuzzer
// over the parser and interpreter. Every case must end in a rendered string or a clear Status,
// never a crash or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "base/mapped_file.h"
#include "support/test_data.h"
#include "tokenizer/chat_template/chat_template.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

const std::string kShared = LOOM_SHARED_DIR;

StatusOr<std::string> RenderText(const std::string& source,
                                 const ordered_json& ctx = ordered_json::object(),
                                 const RenderOptions& options = {}) {
  ASSIGN_OR_RETURN(ChatTemplate tpl, ChatTemplate::Parse(source));
  return tpl.Render(ctx, options);
}

std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

constexpr const char* kChatml =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

TEST(ChatTemplateRobustness, InvalidUtf8IsRejectedWithItsLocation) {
  auto bad_source = ChatTemplate::Parse("hello \xff{{ x }}");
  ASSERT_FALSE(bad_source.ok());
  EXPECT_EQ(bad_source.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_source.status().message().find("UTF-8"), std::string::npos);

  // nlohmann::json stores bytes as given; the context converter validates them.
  ordered_json ctx = {
      {"messages", {{{"role", "user"}, {"content", std::string("ok \xc3\x28 bad")}}}}};
  auto out = RenderText(kChatml, ctx);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("messages[0].content"), std::string::npos)
      << out.status().ToString();
}

TEST(ChatTemplateRobustness, TenMegabyteInputs) {
  const std::string big(10 << 20, 'a');
  ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", big}}}},
                      {"add_generation_prompt", true}};
  auto t0 = std::chrono::steady_clock::now();
  auto out = RenderText(kChatml, ctx);
  std::cout << "[10MB] message rendered in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(
      out->size(),
      big.size() + std::string("<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n").size());
  // A 10 MB template source parses and renders too.
  auto src = RenderText(Repeat("text {{ 1 + 1 }} {% if true %}x{% endif %}\n", 250000));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(src->size(), 250000u * std::string("text 2 x").size());  // trim_blocks eats "\n"
  std::cout << "[10MB] message + 10 MB template in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}

TEST(ChatTemplateRobustness, DeepNestingIsAnErrorNotACrash) {
  for (const std::string& src :
       {Repeat("{% if true %}", 100000), "{{ " + Repeat("(", 100000) + "1 }}",
        "{{ " + Repeat("[", 100000) + " }}", "{{ " + Repeat("not ", 100000) + "1 }}",
        "{{ 1" + Repeat(" + 1", 100000) + " }}", "{{ x" + Repeat(".a", 100000) + " }}",
        "{{ x" + Repeat(" | trim", 100000) + " }}", Repeat("{% for x in y %}", 100000)}) {
    auto t = ChatTemplate::Parse(src);
    ASSERT_FALSE(t.ok()) << src.substr(0, 40);
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  }
  // Moderate nesting still works.
  auto ok = RenderText(Repeat("{% if true %}", 150) + "deep" + Repeat("{% endif %}", 150));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "deep");
  // Deeply nested context JSON.
  ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = ordered_json::array({deep});  // > kMaxNesting (512)
  auto ctx = RenderText("{{ x }}", {{"x", deep}});
  EXPECT_FALSE(ctx.ok());
  // Nesting built by the template itself, and a namespace that contains itself.
  auto grown = RenderText(
      "{% set ns = namespace(x=1) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}"
      "{{ ns.x | tojson }}");
  EXPECT_FALSE(grown.ok());
  auto cyclic = RenderText("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_FALSE(cyclic.ok());
  EXPECT_EQ(cyclic.status().code(), StatusCode::kResourceExhausted);
}

TEST(ChatTemplateRobustness, RunawayTemplatesHitLimits) {
  RenderOptions options;
  options.max_loop_iterations = 100000;
  auto loops =
      RenderText("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 ordered_json::object(), options);
  ASSERT_FALSE(loops.ok());
  EXPECT_EQ(loops.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(loops.status().message().find("iteration limit"), std::string::npos);

  auto recursion = RenderText("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(recursion.ok());
  EXPECT_EQ(recursion.status().code(), StatusCode::kResourceExhausted);

  auto huge = RenderText("{{ 'x' * 10000000000 }}");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);

  auto doubling = RenderText(
      "{% set ns = namespace(s='xy') %}{% for i in range(80) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}{{ ns.s | length }}");
  ASSERT_FALSE(doubling.ok());
  EXPECT_EQ(doubling.status().code(), StatusCode::kResourceExhausted);

  auto list_doubling = RenderText(
      "{% set ns = namespace(l=[1]) %}{% for i in range(80) %}{% set ns.l = ns.l + ns.l %}"
      "{% endfor %}");
  ASSERT_FALSE(list_doubling.ok());

  auto range = RenderText("{{ range(10000000) | length }}");
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("MAX_RANGE"), std::string::npos);
}

// Mutation fuzzing seeded with every real template: random byte edits biased towards Jinja
// syntax. Each input must parse-or-fail and render-or-fail cleanly within the limits.
TEST(ChatTemplateRobustness, FuzzParserAndInterpreter) {
  std::vector<std::string> seeds = {
      kChatml, "{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ m(1) }}",
      "{{ messages | selectattr('role', 'eq', 'user') | map(attribute='content') | join }}"};
  const std::filesystem::path dir = kShared + "/data/chat-templates/chat-templates-llamacpp";
  if (testing::OptionalFile(dir.string())) {
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      if (f.path().extension() == ".jinja") seeds.push_back(*ReadFileToString(f.path().string()));
    }
  }
  ordered_json ctx = {
      {"messages",
       {{{"role", "system"}, {"content", "s"}},
        {{"role", "user"}, {"content", "u"}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", {{"a", 1}}}}}}}}},
        {{"role", "tool"}, {"content", "r"}}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
      {"add_generation_prompt", true},
      {"bos_token", "<s>"}};
  RenderOptions options;
  options.max_loop_iterations = 20000;
  options.max_output_bytes = 1 << 20;
  options.now_unix_seconds = 0;
  static const std::string kAlphabet =
      "{}%#-+()[]|.,:~'\"=<>*/ \n\tabcdefghijklmnopqrstuvwxyz0123456789_\x01\xff";
  std::mt19937 rng(12345);
  int num_parsed = 0, num_rendered = 0;
  const int kIterations = 6000;
  for (int iter = 0; iter < kIterations; ++iter) {
    std::string s = seeds[rng() % seeds.size()];
    const int num_edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < num_edits && !s.empty(); ++e) {
      const size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s.erase(pos, 1 + rng() % 16);
          break;
        case 1:
          s.insert(pos, 1, kAlphabet[rng() % kAlphabet.size()]);
          break;
        case 2:
          s[pos] = kAlphabet[rng() % kAlphabet.size()];
          break;
        case 3: {  // duplicate a span (grows nesting)
          const size_t len = std::min<size_t>(1 + rng() % 64, s.size() - pos);
          s.insert(pos, s.substr(pos, len));
          break;
        }
      }
    }
    auto tpl = ChatTemplate::Parse(s);
    if (!tpl.ok()) {
      EXPECT_FALSE(tpl.status().message().empty());
      continue;
    }
    ++num_parsed;
    auto out = tpl->Render(ctx, options);
    if (out.ok()) {
      ++num_rendered;
    } else {
      EXPECT_FALSE(out.status().message().empty());
    }
  }
  std::cout << "[fuzz] " << kIterations << " mutants: " << num_parsed << " parsed, " << num_rendered
            << " rendered\n";
  EXPECT_GT(num_parsed, 0);
}

}  // namespace
}  // namespace loom
