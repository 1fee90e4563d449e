// tool_parser_bench: what a choice's tool-call parser costs per streamed token.
//
//   tool_parser_bench [repeats]
//
// For each format, a reply of prose (~1.2 kB) followed by one call with ~0.6 kB of arguments in
// the format's markup, and the prose alone, are fed to a fresh parser in 4-byte chunks (about a
// BPE token each), `repeats` times (default 2000); prints the median over 5 rounds of the time
// per chunk. A served token's inter-token latency is milliseconds; this is the parser's share.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/tool_parser.h"

namespace loom {
namespace {

using F = ToolCallFormat;

std::string Prose() {
  std::string s;
  for (int i = 0; i < 24; ++i) {
    s += "The forecast for the coming days shows mild weather, some rain in the north. ";
  }
  return s;
}

std::string ArgsJson() {
  std::string s = R"({"city": "Paris", "days": 3, "notes": ")";
  for (int i = 0; i < 10; ++i) s += "a longer free-text argument with {braces} and \\\"quotes\\\" ";
  return s + R"(", "tags": ["a", "b", "c"]})";
}

std::string Call(F format) {
  const std::string args = ArgsJson();
  switch (format) {
    case F::kHermes:
      return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + args + "}\n</tool_call>";
    case F::kLlama3Json:
      return "{\"name\": \"get_weather\", \"parameters\": " + args + "}";
    case F::kMistral:
      return "[TOOL_CALLS]get_weather[ARGS]" + args;
    case F::kPhi4Mini:
      return "functools[{\"name\": \"get_weather\", \"arguments\": " + args + "}]";
    case F::kDeepSeekV3:
      return "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
             "```json\n" +
             args + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    case F::kDeepSeekV31:
      return "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + args +
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    case F::kQwen3Coder: {
      std::string s =
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n";
      s += "<parameter=days>\n3\n</parameter>\n<parameter=notes>\n";
      for (int i = 0; i < 10; ++i) s += "a longer free-text argument with {braces} and \"quotes\" ";
      return s + "\n</parameter>\n</function>\n</tool_call>";
    }
    case F::kGlm45: {
      std::string s = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris";
      s += "</arg_value>\n<arg_key>notes</arg_key>\n<arg_value>";
      for (int i = 0; i < 10; ++i) s += "a longer free-text argument with {braces} and \"quotes\" ";
      return s + "</arg_value>\n</tool_call>";
    }
    default:
      return "";
  }
}

// Nanoseconds per chunk of feeding `text` to fresh parsers, median of 5 rounds.
double NsPerChunk(F format, const std::string& text, int repeats) {
  std::vector<ToolSpec> tools = {{"get_weather", nlohmann::json::parse(R"({"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
      "notes": {"type": "string"}, "tags": {"type": "array"}}})")}};
  const size_t chunks = (text.size() + 3) / 4;
  std::vector<double> rounds;
  size_t sink = 0;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) {
      auto parser = MakeToolCallParser(format, tools);
      std::vector<ToolParseEvent> events;
      for (size_t at = 0; at < text.size(); at += 4) {
        parser->Feed(std::string_view(text).substr(at, 4), &events);
        sink += events.size();
        events.clear();
      }
      parser->Flush(&events);
      sink += events.size();
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    rounds.push_back(ns / (static_cast<double>(repeats) * static_cast<double>(chunks)));
  }
  std::sort(rounds.begin(), rounds.end());
  if (sink == 0) std::printf("(no events)\n");
  return rounds[2];
}

int Main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::printf("%-14s %16s %16s\n", "format", "prose ns/chunk", "prose+call");
  for (const F format : {F::kHermes, F::kQwen3Coder, F::kLlama3Json, F::kMistral, F::kDeepSeekV3,
                         F::kDeepSeekV31, F::kGlm45, F::kPhi4Mini}) {
    const std::string prose = format == F::kLlama3Json ? "" : Prose();
    const double plain = prose.empty() ? 0 : NsPerChunk(format, prose, repeats);
    const double with_call = NsPerChunk(format, prose + Call(format), repeats);
    std::printf("%-14s %16.1f %16.1f\n", std::string(ToolCallFormatName(format)).c_str(), plain,
                with_call);
  }
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) { return loom::Main(argc, argv); }
