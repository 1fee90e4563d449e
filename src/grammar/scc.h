// Strongly connected components of a rule graph, by Tarjan's algorithm run iteratively (grammars
// nest thousands of rules deep, past what recursion's stack allows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/status.h"

namespace loom {

// The graph has nodes [0, n) and edges [edge_begin[v], edge_begin[v + 1]) out of v, whose targets
// target(k) gives. Calls on_component(nodes) once per component, each after every component it
// reaches (dependency order); stops at and returns the first error it returns.
template <class Target, class OnComponent>
Status ForEachStronglyConnectedComponent(int32_t n, const std::vector<uint32_t>& edge_begin,
                                         Target target, OnComponent on_component) {
  std::vector<int32_t> index(n, -1), low(n, 0), stack, comp;
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<std::pair<int32_t, uint32_t>> dfs;  // (node, next edge)
  int32_t counter = 0;
  auto enter = [&](int32_t v) {
    index[v] = low[v] = counter++;
    stack.push_back(v);
    on_stack[v] = 1;
    dfs.push_back({v, edge_begin[v]});
  };
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    enter(root);
    while (!dfs.empty()) {
      auto& [v, next] = dfs.back();
      if (next < edge_begin[v + 1]) {
        const int32_t w = target(next++);
        if (index[w] < 0) {
          enter(w);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const int32_t done = v;
      dfs.pop_back();
      if (!dfs.empty()) low[dfs.back().first] = std::min(low[dfs.back().first], low[done]);
      if (low[done] != index[done]) continue;
      comp.clear();
      int32_t w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = 0;
        comp.push_back(w);
      } while (w != done);
      if (Status s = on_component(comp); !s.ok()) return s;
    }
  }
  return OkStatus();
}

}  // namespace loom
