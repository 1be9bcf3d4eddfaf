#include "xtel/metrics/snapshot.hpp"

#include <algorithm>

namespace xtel::metrics {

snapshot take_snapshot(const metric_store& store,
                       std::vector<label> labels,
                       const std::vector<bool>* served) {
    snapshot out;
    out.labels = std::move(labels);
    const auto families = store.families();
    out.families.reserve(families.size());
    for (std::size_t id = 0; id < families.size(); ++id) {
        if (served != nullptr && (id >= served->size() || !(*served)[id])) {
            continue;
        }
        const family& f = families[id];
        const auto all = f.all_series();
        if (all.empty()) {
            continue;  // a family appears with its first series
        }
        out.families.push_back({f.spec(), {all.begin(), all.end()}});
    }
    std::sort(out.families.begin(), out.families.end(),
              [](const family_snapshot& a, const family_snapshot& b) {
                  return a.spec.name < b.spec.name;
              });
    return out;
}

}  // namespace xtel::metrics
