#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

// Feeds `deltas` and returns everything emitted (including the final flush) and the stop.
std::pair<std::string, std::optional<std::string>> RunMatcher(
    std::vector<std::string> stops, const std::vector<std::string>& deltas) {
  StopMatcher m(std::move(stops));
  std::string out;
  std::optional<std::string> stop;
  for (const auto& d : deltas) {
    auto r = m.Add(d);
    out += r.text;
    if (r.stop) stop = r.stop;
  }
  out += m.Flush();
  return {out, stop};
}

struct Case {
  const char* name;
  std::vector<std::string> stops;
  std::vector<std::string> deltas;
  std::string expected_text;
  std::optional<std::string> expected_stop;
};

class StopMatcherTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(StopMatcherTableTest, EmitsTextBeforeTheStopOnly) {
  const Case& c = GetParam();
  auto [text, stop] = RunMatcher(c.stops, c.deltas);
  EXPECT_EQ(text, c.expected_text);
  EXPECT_EQ(stop, c.expected_stop);
}

INSTANTIATE_TEST_SUITE_P(
    Table, StopMatcherTableTest,
    ::testing::Values(Case{"no_stops", {}, {"a", "b"}, "ab", std::nullopt},
                      Case{"no_match", {"END"}, {"Once ", "upon"}, "Once upon", std::nullopt},
                      Case{"match_in_one_delta", {"END"}, {"abcENDxyz"}, "abc", "END"},
                      Case{"split_across_deltas", {"END"}, {"abcE", "N", "Dxyz"}, "abc", "END"},
                      Case{"partial_then_diverge", {"END"}, {"abcEN", "x"}, "abcENx", std::nullopt},
                      Case{"partial_at_end_flushed", {"END"}, {"abcEN"}, "abcEN", std::nullopt},
                      Case{"earliest_wins", {"c", "ab"}, {"xabc"}, "x", "ab"},
                      Case{"longer_wins_on_tie", {"a", "ab"}, {"zab"}, "z", "ab"},
                      Case{"stop_at_start", {"Once"}, {"Once upon"}, "", "Once"},
                      Case{"newline_stop", {"\n"}, {"line one", "\nline two"}, "line one", "\n"},
                      Case{"nothing_after_stop", {"."}, {"a.", "b", "c"}, "a", "."},
                      Case{"overlapping_prefix", {"aab"}, {"aa", "aab"}, "aa", "aab"},
                      Case{"empty_stop_ignored", {""}, {"abc"}, "abc", std::nullopt},
                      Case{"utf8_stop", {"é!"}, {"caf", "é", "!x"}, "caf", "é!"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(StopMatcherTest, HoldsBackOnlyPossiblePrefixes) {
  StopMatcher m({"STOP"});
  auto r = m.Add("abcST");
  EXPECT_EQ(r.text, "abc");  // "ST" might start "STOP"
  r = m.Add("AR");
  EXPECT_EQ(r.text, "STAR");
  EXPECT_FALSE(m.stopped());
  r = m.Add("STOP");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.stop, "STOP");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Add("more").text, "");
  EXPECT_EQ(m.Flush(), "");
}

}  // namespace
}  // namespace loom
