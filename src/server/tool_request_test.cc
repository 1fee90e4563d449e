// The tool-calling fields of OpenAI and Anthropic requests: what agents send (Claude Code's and
// Qwen Code's request shapes, cut down) parses into the normalized tools / messages the chat
// templates read; malformed tools and tool-call history are 400s naming the field.
#include <gtest/gtest.h>

#include "server/anthropic_request.h"
#include "server/openai_request.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

StatusOr<GenerationRequest> Chat(const std::string& body, std::string* param) {
  return ParseChatCompletionsRequest(body, RequestDefaults{}, param);
}
StatusOr<GenerationRequest> Messages(const std::string& body, std::string* param) {
  return ParseMessagesRequest(body, RequestDefaults{}, param);
}

const char* kWeatherTool =
    R"({"type":"function","function":{"name":"get_weather","description":"Weather of a city",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}},
                      "required":["city"]}}})";

std::string ChatWithTools(const std::string& extra) {
  return std::string(R"({"messages":[{"role":"user","content":"hi"}],"tools":[)") + kWeatherTool +
         "]" + (extra.empty() ? "" : "," + extra) + "}";
}

struct Bad {
  const char* name;
  bool anthropic;
  std::string body;
  std::string param;
  std::string substring;
};

std::vector<Bad> BadCases() {
  const std::string amsg = R"("max_tokens":8,"messages":[{"role":"user","content":"hi"}])";
  const std::string atool = R"({"name":"get_weather","input_schema":{"type":"object"}})";
  return {
      {"tools_not_array", false, R"({"messages":[{"role":"user","content":"hi"}],"tools":{}})",
       "tools", "must be an array"},
      {"tool_not_object", false, R"({"messages":[{"role":"user","content":"hi"}],"tools":[1]})",
       "tools[0]", "must be an object"},
      {"tool_type_missing", false,
       R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"function":{"name":"f"}}]})",
       "tools[0].type", "must be \"function\""},
      {"tool_type_retrieval", false,
       R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"retrieval"}]})",
       "tools[0].type", "function tools only"},
      {"tool_function_missing", false,
       R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function"}]})",
       "tools[0].function", "function is required"},
      {"tool_name_missing", false,
       R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{}}]})",
       "tools[0].function.name", "is required"},
      {"tool_name_space", false,
       R"({"messages":[{"role":"user","content":"hi"}],
           "tools":[{"type":"function","function":{"name":"get weather"}}]})",
       "tools[0].function.name", "whitespace"},
      {"tool_name_empty", false,
       R"({"messages":[{"role":"user","content":"hi"}],
           "tools":[{"type":"function","function":{"name":""}}]})",
       "tools[0].function.name", "1 to 256"},
      {"tool_parameters_not_object", false,
       R"({"messages":[{"role":"user","content":"hi"}],
           "tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]})",
       "tools[0].function.parameters", "must be a JSON Schema object"},
      {"tool_description_type", false,
       R"({"messages":[{"role":"user","content":"hi"}],
           "tools":[{"type":"function","function":{"name":"f","description":7}}]})",
       "tools[0].function.description", "must be a string"},
      {"tool_declared_twice", false,
       R"({"messages":[{"role":"user","content":"hi"}],"tools":[)" + std::string(kWeatherTool) +
           "," + kWeatherTool + "]}",
       "tools[1].function.name", "declared twice"},
      {"tools_and_functions", false, ChatWithTools(R"("functions":[{"name":"f"}])"), "functions",
       "not both"},
      {"tool_choice_unknown_string", false, ChatWithTools(R"("tool_choice":"always")"),
       "tool_choice", "\"always\" is unknown"},
      {"tool_choice_unknown_tool", false,
       ChatWithTools(R"("tool_choice":{"type":"function","function":{"name":"g"}})"),
       "tool_choice.function.name", "\"g\" is not one of the request's tools"},
      {"tool_choice_without_tools", false,
       R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"auto"})", "tool_choice",
       "declares no tools"},
      {"function_call_unknown", false,
       R"({"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}],
           "function_call":{"name":"g"}})",
       "function_call.name", "not one of"},
      {"parallel_tool_calls_type", false, ChatWithTools(R"("parallel_tool_calls":"yes")"),
       "parallel_tool_calls", "must be a boolean"},
      {"tool_result_unknown_id", false,
       R"({"messages":[{"role":"user","content":"hi"},
           {"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function",
            "function":{"name":"get_weather","arguments":"{}"}}]},
           {"role":"tool","tool_call_id":"b","content":"sunny"}]})",
       "messages[2].tool_call_id", "answers no tool call"},
      {"assistant_without_content_or_calls", false,
       R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant"}]})",
       "messages[1].content", "content is required"},
      {"tool_call_arguments_number", false,
       R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a",
            "type":"function","function":{"name":"f","arguments":5}}]}]})",
       "messages[0].tool_calls[0].function.arguments", "string of JSON"},
      {"tool_call_type", false,
       R"({"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"code",
            "function":{"name":"f"}}]}]})",
       "messages[0].tool_calls[0].type", "must be \"function\""},
      {"tool_calls_not_array", false,
       R"({"messages":[{"role":"assistant","tool_calls":{"id":"a"}}]})", "messages[0].tool_calls",
       "must be an array"},
      {"function_role_without_name", false, R"({"messages":[{"role":"function","content":"x"}]})",
       "messages[0].name", "required for role \"function\""},
      // Anthropic.
      {"anthropic_tools_not_array", true, "{" + amsg + R"(,"tools":{}})", "tools",
       "must be an array"},
      {"anthropic_server_tool", true,
       "{" + amsg + R"(,"tools":[{"type":"web_search_20250305","name":"web_search"}]})",
       "tools[0].type", "server tool"},
      {"anthropic_schema_not_object", true,
       "{" + amsg + R"(,"tools":[{"name":"f","input_schema":[]}]})", "tools[0].input_schema",
       "must be a JSON Schema object"},
      {"anthropic_tool_choice_string", true,
       "{" + amsg + ",\"tools\":[" + atool + R"(],"tool_choice":"auto"})", "tool_choice",
       "must be an object"},
      {"anthropic_tool_choice_type", true,
       "{" + amsg + ",\"tools\":[" + atool + R"(],"tool_choice":{"type":"sometimes"}})",
       "tool_choice.type", "\"sometimes\" is unknown"},
      {"anthropic_tool_choice_unknown_tool", true,
       "{" + amsg + ",\"tools\":[" + atool + R"(],"tool_choice":{"type":"tool","name":"x"}})",
       "tool_choice.name", "not one of"},
      {"anthropic_disable_parallel_type", true,
       "{" + amsg + ",\"tools\":[" + atool +
           R"(],"tool_choice":{"type":"auto","disable_parallel_tool_use":1}})",
       "tool_choice.disable_parallel_tool_use", "must be a boolean"},
      {"anthropic_tool_use_in_user_turn", true,
       R"({"max_tokens":8,"messages":[{"role":"user","content":[
            {"type":"tool_use","id":"t","name":"f","input":{}}]}]})",
       "messages[0].content[0]", "belong to assistant"},
      {"anthropic_tool_use_without_id", true,
       R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant",
            "content":[{"type":"tool_use","name":"f","input":{}}]}]})",
       "messages[1].content[0].id", "id is required"},
      {"anthropic_tool_use_input_array", true,
       R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant",
            "content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]})",
       "messages[1].content[0].input", "must be an object"},
      {"anthropic_tool_result_unknown_id", true,
       R"({"max_tokens":8,"messages":[{"role":"user","content":[
            {"type":"tool_result","tool_use_id":"nope","content":"x"}]}]})",
       "messages[0].content[0].tool_use_id", "answers no tool_use block"},
      {"anthropic_tool_result_image", true,
       R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant",
            "content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
           {"role":"user","content":[{"type":"tool_result","tool_use_id":"t",
            "content":[{"type":"image","source":{}}]}]}]})",
       "messages[2].content[0].content[0]", "not supported yet"},
  };
}

class ToolBadInputTest : public ::testing::TestWithParam<Bad> {};

TEST_P(ToolBadInputTest, RejectedWithFieldNamed) {
  const Bad& c = GetParam();
  std::string param;
  StatusOr<GenerationRequest> r = c.anthropic ? Messages(c.body, &param) : Chat(c.body, &param);
  ASSERT_FALSE(r.ok()) << c.name << " was accepted";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(param, c.param) << r.status().message();
  EXPECT_NE(std::string(r.status().message()).find(c.substring), std::string::npos)
      << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(Table, ToolBadInputTest, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ToolRequestTest, CompletionsRefuseTools) {
  std::string param;
  auto r = ParseCompletionsRequest(R"({"prompt":"x","tools":[]})", RequestDefaults{}, &param);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(param, "tools");
  EXPECT_NE(std::string(r.status().message()).find("/v1/chat/completions"), std::string::npos);
}

TEST(ToolRequestTest, OpenAiToolsAndHistoryNormalized) {
  std::string param;
  auto r = Chat(
      R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"weather?"},
          {"role":"assistant","content":null,"tool_calls":[
             {"id":"call_1","type":"function",
              "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
             {"id":"call_2","type":"function",
              "function":{"name":"get_weather","arguments":"not json"}}]},
          {"role":"tool","tool_call_id":"call_1","content":"sunny"},
          {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"rain"}]}],
          "tools":[)" +
          std::string(kWeatherTool) +
          R"(,{"type":"function","function":{"name":"no_params"}}],
          "tool_choice":"auto","parallel_tool_calls":false})",
      &param);
  ASSERT_TRUE(r.ok()) << r.status().message() << " " << param;
  ASSERT_EQ(r->tools.size(), 2u);
  EXPECT_EQ(r->tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r->tools[0]["function"]["parameters"]["required"][0], "city");
  EXPECT_EQ(r->tools[1]["function"]["parameters"],
            ordered_json::parse(R"({"type":"object","properties":{}})"));
  EXPECT_EQ(r->tool_choice, ToolChoiceMode::kAuto);
  EXPECT_FALSE(r->parallel_tool_calls);
  ASSERT_EQ(r->messages.size(), 5u);
  const ordered_json& a = r->messages[2];
  EXPECT_EQ(a["role"], "assistant");
  EXPECT_EQ(a["content"], "");
  EXPECT_EQ(a.begin().key(), "role");
  ASSERT_EQ(a["tool_calls"].size(), 2u);
  EXPECT_EQ(a["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(a["tool_calls"][0]["function"]["arguments"],
            ordered_json::parse(R"({"city":"Paris"})"));
  EXPECT_EQ(a["tool_calls"][1]["function"]["arguments"], "not json");  // kept as text
  EXPECT_EQ(r->messages[3], ordered_json::parse(R"({"role":"tool","content":"sunny",
                                                    "tool_call_id":"call_1","name":"get_weather"})"));
  EXPECT_EQ(r->messages[4]["content"], "rain");
}

TEST(ToolRequestTest, LegacyFunctions) {
  std::string param;
  auto r = Chat(R"({"messages":[{"role":"user","content":"hi"},
                    {"role":"assistant","function_call":{"name":"f","arguments":"{}"}},
                    {"role":"function","name":"f","content":"done"}],
                    "functions":[{"name":"f","parameters":{"type":"object"}}],
                    "function_call":"auto"})",
                &param);
  ASSERT_TRUE(r.ok()) << r.status().message() << " " << param;
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tools[0]["type"], "function");
  EXPECT_EQ(r->messages[1]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r->messages[2]["role"], "tool");
  EXPECT_EQ(r->messages[2]["name"], "f");
}

TEST(ToolRequestTest, ToolChoiceNoneAndEmptyTools) {
  std::string param;
  auto none = Chat(ChatWithTools(R"("tool_choice":"none")"), &param);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->tool_choice, ToolChoiceMode::kNone);
  auto empty = Chat(R"({"messages":[{"role":"user","content":"hi"}],"tools":[],
                        "tool_choice":"none"})",
                    &param);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->tools.empty());
}

// Claude Code's first request, cut down: system blocks with cache_control, a mid-conversation
// system turn, adaptive thinking, metadata, context_management, output_config, a 128000
// max_tokens and tools with $schema.
TEST(ToolRequestTest, ClaudeCodeShapeAccepted) {
  std::string param;
  auto r = Messages(
      R"({"model":"claude-opus","max_tokens":128000,"stream":true,
          "system":[{"type":"text","text":"billing"},
                    {"type":"text","text":"You are an agent.","cache_control":{"type":"ephemeral"}}],
          "messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x"},
                                                {"type":"text","text":"say hi",
                                                 "cache_control":{"type":"ephemeral"}}]},
                      {"role":"system","content":[{"type":"text","text":"turn rules"}]}],
          "tools":[{"name":"Bash","description":"Run","input_schema":{
                      "$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
                      "properties":{"command":{"type":"string"}},"required":["command"],
                      "additionalProperties":false}},
                   {"name":"Deferred","description":"","input_schema":{"type":"object",
                      "properties":{}},"defer_loading":true}],
          "thinking":{"type":"adaptive","display":"omitted"},
          "metadata":{"user_id":"{\"device_id\":\"x\"}"},
          "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
          "output_config":{"effort":"medium"}})",
      &param);
  ASSERT_TRUE(r.ok()) << r.status().message() << " " << param;
  EXPECT_TRUE(r->max_tokens_is_cap);
  EXPECT_EQ(r->params.max_tokens, 128000);
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0]["content"], "billingYou are an agent.");
  EXPECT_EQ(r->messages[1]["content"], "<system-reminder>xsay hi");
  EXPECT_EQ(r->messages[2]["role"], "system");
  ASSERT_EQ(r->tools.size(), 2u);
  EXPECT_EQ(r->tools[0]["function"]["name"], "Bash");
  EXPECT_EQ(r->tools[0]["function"]["parameters"]["required"][0], "command");
  EXPECT_EQ(r->template_kwargs["enable_thinking"], true);
}

TEST(ToolRequestTest, AnthropicToolTurnsNormalized) {
  std::string param;
  auto r = Messages(
      R"({"max_tokens":64,
          "tools":[{"name":"get_weather","input_schema":{"type":"object"}}],
          "tool_choice":{"type":"auto","disable_parallel_tool_use":true},
          "messages":[
            {"role":"user","content":"weather in Paris and Rome?"},
            {"role":"assistant","content":[
               {"type":"thinking","thinking":"need tools","signature":"sig"},
               {"type":"text","text":"Checking."},
               {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
               {"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Rome"}}]},
            {"role":"user","content":[
               {"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
               {"type":"tool_result","tool_use_id":"toolu_2",
                "content":[{"type":"text","text":"rain"}],"is_error":false},
               {"type":"text","text":"and tomorrow?"}]}]})",
      &param);
  ASSERT_TRUE(r.ok()) << r.status().message() << " " << param;
  EXPECT_FALSE(r->parallel_tool_calls);
  ASSERT_EQ(r->messages.size(), 5u);
  const ordered_json& a = r->messages[1];
  EXPECT_EQ(a["content"], "Checking.");
  EXPECT_EQ(a["reasoning_content"], "need tools");
  ASSERT_EQ(a["tool_calls"].size(), 2u);
  EXPECT_EQ(a["tool_calls"][1]["id"], "toolu_2");
  EXPECT_EQ(a["tool_calls"][1]["function"]["arguments"], ordered_json::parse(R"({"city":"Rome"})"));
  EXPECT_EQ(r->messages[2]["role"], "tool");
  EXPECT_EQ(r->messages[2]["tool_call_id"], "toolu_1");
  EXPECT_EQ(r->messages[2]["name"], "get_weather");
  EXPECT_EQ(r->messages[3]["content"], "rain");
  EXPECT_EQ(r->messages[4], ordered_json::parse(R"({"role":"user","content":"and tomorrow?"})"));
  EXPECT_TRUE(r->add_generation_prompt);
}

TEST(ToolRequestTest, ForcedToolChoices) {
  std::string param;
  auto required = Chat(ChatWithTools(R"("tool_choice":"required")"), &param);
  ASSERT_TRUE(required.ok()) << required.status().message();
  EXPECT_EQ(required->tool_choice, ToolChoiceMode::kRequired);
  auto named =
      Chat(ChatWithTools(R"("tool_choice":{"type":"function","function":{"name":"get_weather"}})"),
           &param);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->tool_choice, ToolChoiceMode::kNamed);
  EXPECT_EQ(named->tool_choice_name, "get_weather");
  auto any = Messages(R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"}],
                          "tools":[{"name":"f","input_schema":{"type":"object"}}],
                          "tool_choice":{"type":"any"}})",
                      &param);
  ASSERT_TRUE(any.ok()) << any.status().message();
  EXPECT_EQ(any->tool_choice, ToolChoiceMode::kRequired);
}

// The parameters keep their declaration order (nlohmann::json would sort them): templates print
// them and forced calls write the properties in this order.
TEST(ToolRequestTest, ParameterSchemasKeepTheirKeyOrder) {
  std::string param;
  auto r = Chat(R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",
                    "function":{"name":"f","parameters":{"type":"object","properties":{
                      "zeta":{"type":"string"},"alpha":{"type":"integer"}}}}}]})",
                &param);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tools[0]["function"]["parameters"]["properties"].begin().key(), "zeta");
  auto a = Messages(R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"}],
                        "tools":[{"name":"f","input_schema":{"properties":{"b":{},"a":{}},
                                                             "type":"object"}}]})",
                    &param);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->tools[0]["function"]["parameters"].begin().key(), "properties");
  EXPECT_EQ(a->tools[0]["function"]["parameters"]["properties"].begin().key(), "b");
}

TEST(ToolRequestTest, CasesAreMany) { EXPECT_GE(BadCases().size(), 30u); }

}  // namespace
}  // namespace loom
