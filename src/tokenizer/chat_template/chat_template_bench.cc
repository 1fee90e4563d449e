// chat_template_bench: time to render a 20-message conversation with tools through real chat
// templates (target: < 200 us per render), plus parse times.
//
//   chat_template_bench [path/to/shared [name-substring]]  (default: the build's LOOM_SHARED_DIR;
//   a substring renders only the matching template, 5000 times, for profiling)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "tokenizer/chat_template/chat_template.h"

namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// 20 messages: system, then user / assistant-with-tool-call / tool / assistant turns.
ordered_json MakeContext() {
  ordered_json tools = ordered_json::array();
  for (const char* name : {"get_weather", "search_web", "run_code"}) {
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", name},
                       {"description", std::string("Tool ") + name + " does something useful."},
                       {"parameters",
                        {{"type", "object"},
                         {"properties",
                          {{"query", {{"type", "string"}, {"description", "What to look up"}}},
                           {"limit", {{"type", "integer"}}}}},
                         {"required", {"query"}}}}}}});
  }
  ordered_json messages = ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant with tools."}});
  int turn = 0;
  while (messages.size() < 20) {
    const std::string id = "call" + std::to_string(10000 + turn);
    messages.push_back({{"role", "user"},
                        {"content", "Question number " + std::to_string(turn) +
                                        ": what is the weather like in Paris today?"}});
    messages.push_back(
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          {{{"id", id},
            {"type", "function"},
            {"function", {{"name", "get_weather"}, {"arguments", {{"query", "Paris"}}}}}}}}});
    messages.push_back({{"role", "tool"},
                        {"tool_call_id", id},
                        {"name", "get_weather"},
                        {"content", "{\"temperature\": 21, \"sky\": \"clear\"}"}});
    messages.push_back(
        {{"role", "assistant"}, {"content", "It is 21 degrees and clear in Paris."}});
    ++turn;
  }
  messages.erase(messages.begin() + 20, messages.end());
  if (messages.back()["role"] != "user")
    messages.push_back({{"role", "user"}, {"content", "Thanks!"}});
  return {{"messages", messages}, {"tools", tools},      {"add_generation_prompt", true},
          {"bos_token", "<s>"},   {"eos_token", "</s>"}, {"enable_thinking", true}};
}

template <typename F>
double MedianMicros(F&& f, int iterations) {
  std::vector<double> us;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    f();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string shared = argc > 1 ? argv[1] : LOOM_SHARED_DIR;
  const std::string only = argc > 2 ? argv[2] : "";  // a name substring: profile one template
  const std::string dir = shared + "/data/chat-templates/";
  const ordered_json ctx = MakeContext();
  std::printf("%-60s %10s %12s %10s\n", "template (20 messages + 3 tools)", "parse_us", "render_us",
              "out_bytes");
  for (const char* name :
       {"chat-templates-llamacpp/Qwen-Qwen3-0.6B.jinja",
        "chat-templates-llamacpp/meta-llama-Llama-3.1-8B-Instruct.jinja",
        "chat-templates-llamacpp/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
        "chat-templates-llamacpp/Qwen3-Coder.jinja",
        "chat-templates-llamacpp/openai-gpt-oss-120b.jinja",
        "chat-templates-llamacpp/google-gemma-4-31B-it.jinja",
        "chat-templates-mistral-common/v7.jinja"}) {
    if (!only.empty() && std::string(name).find(only) == std::string::npos) continue;
    auto source = loom::ReadFileToString(dir + name);
    if (!source.ok()) {
      std::printf("%-60s (missing: %s)\n", name, source.status().ToString().c_str());
      continue;
    }
    const double parse_us = MedianMicros([&] { (void)loom::ChatTemplate::Parse(*source); }, 50);
    auto tpl = loom::ChatTemplate::Parse(*source);
    if (!tpl.ok()) {
      std::printf("%-60s parse error: %s\n", name, tpl.status().ToString().c_str());
      continue;
    }
    auto first = tpl->Render(ctx);
    if (!first.ok()) {
      std::printf("%-60s render error: %s\n", name, first.status().ToString().c_str());
      continue;
    }
    const double render_us =
        MedianMicros([&] { (void)tpl->Render(ctx); }, only.empty() ? 300 : 5000);
    std::printf("%-60s %10.1f %12.1f %10zu\n", name, parse_us, render_us, first->size());
  }
  if (!only.empty()) return 0;
  std::string big;
  for (int i = 0; i < 250000; ++i) big += "text {{ 1 + 1 }} {% if true %}x{% endif %}\n";
  const auto t0 = Clock::now();
  auto tpl = loom::ChatTemplate::Parse(big);
  const auto t1 = Clock::now();
  auto out = tpl->Render(ordered_json::object());
  const auto t2 = Clock::now();
  std::printf("10 MB template: parse %.1f ms, render %.1f ms\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count());
  return 0;
}
