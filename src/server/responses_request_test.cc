// The Responses API request parser, table-driven: input items → the normalized messages the chat
// templates read, flat tools / namespaces / web_search → tools, tool_choice, text.format → the
// grammar spec, previous_response_id through the ResponseStore; every bad input is a 400 (or a
// 404 for an unknown previous_response_id) naming the field. Also the store's LRU order.
#include "server/responses_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

StatusOr<ResponsesRequest> Parse(const std::string& body, std::string* param,
                                 ResponseStore* store = nullptr) {
  RequestDefaults d;
  d.vocab_size = 512;
  return ParseResponsesRequest(body, d, store, param);
}

ResponsesRequest MustParse(const std::string& body, ResponseStore* store = nullptr) {
  std::string param;
  StatusOr<ResponsesRequest> r = Parse(body, &param, store);
  EXPECT_TRUE(r.ok()) << r.status().message() << " (param " << param << ")";
  return r.ok() ? *std::move(r) : ResponsesRequest{};
}

TEST(ResponsesRequest, StringInputAndInstructions) {
  ResponsesRequest r = MustParse(
      R"({"model":"m","input":"hi","instructions":"be brief","max_output_tokens":7,
          "temperature":0.5,"metadata":{"k":"v"},"user":"u1"})");
  EXPECT_EQ(r.gen.kind, ApiKind::kResponses);
  EXPECT_EQ(r.gen.messages.dump(),
            R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi"}])");
  // The conversation a stored response continues leaves the instructions out.
  EXPECT_EQ(r.conversation.dump(), R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(r.gen.params.max_tokens, 7);
  EXPECT_TRUE(r.gen.max_tokens_is_cap);
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.echo["instructions"], "be brief");
  EXPECT_EQ(r.echo["max_output_tokens"], 7);
  EXPECT_EQ(r.echo["metadata"].dump(), R"({"k":"v"})");
  EXPECT_EQ(r.echo["user"], "u1");
  EXPECT_EQ(r.echo["temperature"].dump(), "0.5");
  EXPECT_EQ(MustParse(R"({"input":"hi","top_p":0.9})").echo["top_p"].dump(), "0.9");
}

TEST(ResponsesRequest, ItemsBecomeMessages) {
  // What Codex sends back after a tool turn: developer and user messages as input_text parts,
  // a reasoning item, the call, its output; then an assistant message in output_text parts.
  ResponsesRequest r = MustParse(R"({"input":[
      {"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},
      {"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
      {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}],
       "encrypted_content":"xyz"},
      {"type":"function_call","id":"fc_1","call_id":"call_1","name":"ls","arguments":"{\"d\":\".\"}"},
      {"type":"function_call","call_id":"call_2","name":"cat","arguments":"{}"},
      {"type":"function_call_output","call_id":"call_1","output":"a.txt"},
      {"type":"function_call_output","call_id":"call_2",
       "output":[{"type":"input_text","text":"x"}]},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}],
      "tools":[{"type":"function","name":"ls","parameters":{"type":"object"}},
               {"type":"function","name":"cat"}]})");
  ordered_json want = ordered_json::parse(R"([
      {"role":"system","content":"rules"},
      {"role":"user","content":"a\nb"},
      {"role":"assistant","content":"","reasoning_content":"think","tool_calls":[
        {"id":"call_1","type":"function","function":{"name":"ls","arguments":{"d":"."}}},
        {"id":"call_2","type":"function","function":{"name":"cat","arguments":{}}}]},
      {"role":"tool","content":"a.txt","tool_call_id":"call_1","name":"ls"},
      {"role":"tool","content":"x","tool_call_id":"call_2","name":"cat"},
      {"role":"assistant","content":"done"}])");
  EXPECT_EQ(r.gen.messages.dump(), want.dump());
}

TEST(ResponsesRequest, ToolsFlatNamespacedAndWebSearchSkipped) {
  // Codex's default tool list, cut down: a function, a namespace of functions, web_search.
  ResponsesRequest r = MustParse(R"({"input":"hi","tools":[
      {"type":"function","name":"exec_command","description":"run","strict":false,
       "parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}}}},
      {"type":"namespace","name":"agents","description":"sub-agents","tools":[
        {"type":"function","name":"spawn_agent","parameters":{"type":"object"}}]},
      {"type":"web_search","external_web_access":false}],
      "tool_choice":"auto","parallel_tool_calls":false})");
  ASSERT_EQ(r.gen.tools.size(), 2u);
  EXPECT_EQ(r.gen.tools[0].dump(),
            R"({"type":"function","function":{"name":"exec_command","description":"run",)"
            R"("parameters":{"type":"object","properties":{"z":{"type":"string"},)"
            R"("a":{"type":"number"}}}}})");  // declaration order kept
  EXPECT_EQ(r.gen.tools[1]["function"]["name"], "spawn_agent");
  EXPECT_EQ(r.tool_namespaces.at("spawn_agent"), "agents");
  EXPECT_EQ(r.tool_namespaces.count("exec_command"), 0u);
  EXPECT_EQ(r.gen.tool_choice, ToolChoiceMode::kAuto);
  EXPECT_FALSE(r.gen.parallel_tool_calls);
  EXPECT_EQ(r.echo["tools"].size(), 3u);  // echoed as sent
}

TEST(ResponsesRequest, ToolChoice) {
  const std::string tools =
      R"("tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}])";
  EXPECT_EQ(
      MustParse(R"({"input":"hi",)" + tools + R"(,"tool_choice":"required"})").gen.tool_choice,
      ToolChoiceMode::kRequired);
  EXPECT_EQ(MustParse(R"({"input":"hi",)" + tools + R"(,"tool_choice":"none"})").gen.tool_choice,
            ToolChoiceMode::kNone);
  ResponsesRequest named =
      MustParse(R"({"input":"hi",)" + tools + R"(,"tool_choice":{"type":"function","name":"g"}})");
  EXPECT_EQ(named.gen.tool_choice, ToolChoiceMode::kNamed);
  EXPECT_EQ(named.gen.tool_choice_name, "g");
  EXPECT_EQ(named.echo["tool_choice"].dump(), R"({"type":"function","name":"g"})");
  // Only web_search (not used) and tool_choice auto: no tools, no error.
  ResponsesRequest web =
      MustParse(R"({"input":"hi","tools":[{"type":"web_search"}],"tool_choice":"auto"})");
  EXPECT_TRUE(web.gen.tools.empty());
}

TEST(ResponsesRequest, TextFormat) {
  ResponsesRequest js = MustParse(
      R"({"input":"hi","text":{"format":{"type":"json_schema","name":"p","strict":true,
          "schema":{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}}}}})");
  ASSERT_TRUE(js.gen.grammar.has_value());
  EXPECT_EQ(js.gen.grammar->kind, GrammarKind::kJsonSchema);
  EXPECT_EQ(js.gen.grammar->text,
            R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}})");
  EXPECT_EQ(js.gen.grammar_field, "text.format.schema");
  EXPECT_EQ(js.echo["text"]["format"]["name"], "p");
  ResponsesRequest obj = MustParse(R"({"input":"hi","text":{"format":{"type":"json_object"}}})");
  ASSERT_TRUE(obj.gen.grammar.has_value());
  EXPECT_EQ(obj.gen.grammar->text, R"({"type":"object"})");
  EXPECT_FALSE(MustParse(R"({"input":"hi","text":{"format":{"type":"text"}}})").gen.grammar);
}

TEST(ResponsesRequest, ReasoningEffortAndCodexExtras) {
  ResponsesRequest r = MustParse(
      R"({"input":"hi","reasoning":{"effort":"none","summary":"auto"},"store":false,
          "stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k",
          "client_metadata":{"a":"b"},"truncation":"auto"})");
  EXPECT_EQ(r.gen.template_kwargs["enable_thinking"], false);
  EXPECT_FALSE(r.store);
  EXPECT_TRUE(r.gen.stream);
  EXPECT_EQ(r.echo["reasoning"].dump(), R"({"effort":"none","summary":"auto"})");
  EXPECT_EQ(MustParse(R"({"input":"hi","reasoning":{"effort":"high"}})")
                .gen.template_kwargs["enable_thinking"],
            true);
}

TEST(ResponsesRequest, PreviousResponseIdContinuesTheStoredConversation) {
  ResponseStore store(4);
  StoredResponse prev;
  prev.conversation = ordered_json::parse(
      R"([{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[
          {"id":"call_9","type":"function","function":{"name":"f","arguments":{}}}]}])");
  store.Put("resp_1", prev);
  ResponsesRequest r = MustParse(
      R"({"previous_response_id":"resp_1","instructions":"new rules","tools":[{"type":"function","name":"f"}],
          "input":[{"type":"function_call_output","call_id":"call_9","output":"42"}]})",
      &store);
  ASSERT_EQ(r.gen.messages.size(), 4u);
  EXPECT_EQ(r.gen.messages[0]["content"], "new rules");
  EXPECT_EQ(r.gen.messages[3].dump(),
            R"({"role":"tool","content":"42","tool_call_id":"call_9","name":"f"})");
  EXPECT_EQ(r.conversation.size(), 3u);
  EXPECT_EQ(r.echo["previous_response_id"], "resp_1");

  std::string param;
  StatusOr<ResponsesRequest> missing =
      Parse(R"({"previous_response_id":"resp_nope","input":"x"})", &param, &store);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(param, "previous_response_id");
  EXPECT_NE(missing.status().message().find("resp_nope"), std::string::npos);
  EXPECT_EQ(ApiError::FromStatus(missing.status(), param).http_status, 404);
}

TEST(ResponseStore, KeepsTheMostRecentlyUsed) {
  ResponseStore store(2);
  store.Put("a", {});
  store.Put("b", {});
  ASSERT_NE(store.Get("a"), nullptr);  // a is now the most recent
  store.Put("c", {});                  // evicts b
  EXPECT_NE(store.Get("a"), nullptr);
  EXPECT_EQ(store.Get("b"), nullptr);
  EXPECT_NE(store.Get("c"), nullptr);
  EXPECT_EQ(store.size(), 2);
  EXPECT_TRUE(store.Erase("a"));
  EXPECT_FALSE(store.Erase("a"));
  ResponseStore none(0);
  none.Put("a", {});
  EXPECT_EQ(none.Get("a"), nullptr);
}

struct Bad {
  const char* name;
  std::string body;
  std::string param;
  std::string substring;
};

std::vector<Bad> BadCases() {
  return {
      {"no_input", R"({"model":"m"})", "input", "input is required"},
      {"input_number", R"({"input":5})", "input", "string or an array"},
      {"input_empty", R"({"input":[]})", "input", "must not be empty"},
      {"item_not_object", R"({"input":[1]})", "input[0]", "must be an object"},
      {"item_type_unknown", R"({"input":[{"type":"banana"}]})", "input[0].type", "unknown"},
      {"item_reference", R"({"input":[{"type":"item_reference","id":"x"}]})", "input[0].type",
       "item_reference"},
      {"hosted_call_item", R"({"input":[{"type":"web_search_call","id":"x"}]})", "input[0].type",
       "function tools only"},
      {"role_missing", R"({"input":[{"type":"message","content":"x"}]})", "input[0].role",
       "required"},
      {"role_tool", R"({"input":[{"role":"tool","content":"x"}]})", "input[0].role", "unknown"},
      {"content_missing", R"({"input":[{"role":"user"}]})", "input[0].content", "required"},
      {"part_unknown", R"({"input":[{"role":"user","content":[{"type":"banana"}]}]})",
       "input[0].content[0].type", "unknown"},
      {"part_image", R"({"input":[{"role":"user","content":[{"type":"input_image"}]}]})",
       "input[0].content[0]", "not supported"},
      {"part_text_missing", R"({"input":[{"role":"user","content":[{"type":"input_text"}]}]})",
       "input[0].content[0].text", "must be a string"},
      {"call_without_call_id", R"({"input":[{"type":"function_call","name":"f"}]})",
       "input[0].call_id", "required"},
      {"call_without_name", R"({"input":[{"type":"function_call","call_id":"c"}]})",
       "input[0].name", "required"},
      {"call_arguments_object",
       R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]})",
       "input[0].arguments", "string of JSON"},
      {"output_without_call_id", R"({"input":[{"type":"function_call_output","output":"x"}]})",
       "input[0].call_id", "required"},
      {"output_unknown_call_id",
       R"({"input":[{"type":"function_call_output","call_id":"c","output":"x"}]})",
       "input[0].call_id", "answers no function_call"},
      {"output_missing",
       R"({"input":[{"type":"function_call","call_id":"c","name":"f"},
                    {"type":"function_call_output","call_id":"c"}]})",
       "input[1].output", "required"},
      {"reasoning_summary_not_array", R"({"input":[{"type":"reasoning","summary":"x"}]})",
       "input[0].summary", "must be an array"},
      {"tools_not_array", R"({"input":"x","tools":{}})", "tools", "must be an array"},
      {"tool_without_name", R"({"input":"x","tools":[{"type":"function"}]})", "tools[0].name",
       "required"},
      {"tool_nested_chat_shape",
       R"({"input":"x","tools":[{"type":"function","function":{"name":"f"}}]})", "tools[0].name",
       "not nested"},
      {"tool_type_missing", R"({"input":"x","tools":[{"name":"f"}]})", "tools[0].type", "required"},
      {"tool_file_search", R"({"input":"x","tools":[{"type":"file_search"}]})", "tools[0].type",
       "function tools only"},
      {"tool_custom", R"({"input":"x","tools":[{"type":"custom","name":"apply_patch"}]})",
       "tools[0].type", "function tools only"},
      {"tool_strict_type", R"({"input":"x","tools":[{"type":"function","name":"f","strict":1}]})",
       "tools[0].strict", "boolean"},
      {"tool_parameters_type",
       R"({"input":"x","tools":[{"type":"function","name":"f","parameters":[]}]})",
       "tools[0].parameters", "JSON Schema object"},
      {"tool_twice",
       R"({"input":"x","tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]})",
       "tools[1].name", "declared twice"},
      {"namespace_without_tools", R"({"input":"x","tools":[{"type":"namespace","name":"n"}]})",
       "tools[0].tools", "array"},
      {"namespace_inner_type",
       R"({"input":"x","tools":[{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}]})",
       "tools[0].tools[0].type", "groups functions"},
      {"tool_choice_unknown_name",
       R"({"input":"x","tools":[{"type":"function","name":"f"}],
           "tool_choice":{"type":"function","name":"g"}})",
       "tool_choice.name", "not one of the request's tools"},
      {"tool_choice_hosted",
       R"({"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"web_search"}})",
       "tool_choice.type", "function tools only"},
      {"tool_choice_without_tools", R"({"input":"x","tool_choice":"required"})", "tool_choice",
       "declares no tools"},
      {"tool_choice_word",
       R"({"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":"any"})",
       "tool_choice", "unknown"},
      {"text_not_object", R"({"input":"x","text":"json"})", "text", "must be an object"},
      {"text_format_type", R"({"input":"x","text":{"format":{"type":"yaml"}}})", "text.format.type",
       "unknown"},
      {"text_format_schema_missing",
       R"({"input":"x","text":{"format":{"type":"json_schema","name":"n"}}})", "text.format.schema",
       "required"},
      {"text_format_schema_type",
       R"({"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":3}}})",
       "text.format.schema", "JSON Schema"},
      {"reasoning_effort", R"({"input":"x","reasoning":{"effort":"max"}})", "reasoning.effort",
       "must be one of"},
      {"max_output_tokens_zero", R"({"input":"x","max_output_tokens":0})", "max_output_tokens", ""},
      {"temperature_range", R"({"input":"x","temperature":3})", "temperature", ""},
      {"metadata_value", R"({"input":"x","metadata":{"k":1}})", "metadata.k", "must be a string"},
      {"store_type", R"({"input":"x","store":"no"})", "store", ""},
      {"n_two", R"({"input":"x","n":2})", "n", "must be 1"},
      {"background", R"({"input":"x","background":true})", "background", "not supported"},
      {"previous_id_type", R"({"input":"x","previous_response_id":7})", "previous_response_id", ""},
      {"truncation_word", R"({"input":"x","truncation":"left"})", "truncation", ""},
  };
}

class ResponsesBad : public ::testing::TestWithParam<Bad> {};

TEST_P(ResponsesBad, IsA4xxNamingTheField) {
  const Bad& c = GetParam();
  std::string param;
  ResponseStore store(4);
  StatusOr<ResponsesRequest> r = Parse(c.body, &param, &store);
  ASSERT_FALSE(r.ok()) << c.body;
  const ApiError e = ApiError::FromStatus(r.status(), param);
  EXPECT_EQ(e.http_status, 400) << e.message;
  EXPECT_EQ(param, c.param) << e.message;
  EXPECT_NE(e.message.find(c.substring), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(c.param.substr(0, c.param.find('['))), std::string::npos)
      << "the message names the field: " << e.message;
}

INSTANTIATE_TEST_SUITE_P(All, ResponsesBad, ::testing::ValuesIn(BadCases()),
                         [](const ::testing::TestParamInfo<Bad>& i) { return i.param.name; });

}  // namespace
}  // namespace loom
