#include "xtel/metrics/snapshot.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace xtel::metrics {

snapshot take_snapshot(const metric_store& store,
                       std::vector<label> labels,
                       const std::vector<bool>* served) {
    snapshot out;
    out.labels = std::move(labels);
    const auto families = store.families();
    // The families' ids put in name order, then copied in it: sorting the copies moved whole
    // families (their specs' strings, their series) about, every publish, which is every round
    // (BM_nixl_flush_paired, docs/performance.md). Names are unique: the order is the same.
    std::vector<std::size_t> ids;
    ids.reserve(families.size());
    for (std::size_t id = 0; id < families.size(); ++id) {
        if (served != nullptr && (id >= served->size() || !(*served)[id])) {
            continue;
        }
        if (families[id].all_series().empty()) {
            continue;  // a family appears with its first series
        }
        ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end(), [&families](std::size_t a, std::size_t b) {
        return families[a].spec().name < families[b].spec().name;
    });
    out.families.reserve(ids.size());
    for (const std::size_t id : ids) {
        const family& f = families[id];
        const auto all = f.all_series();
        out.families.push_back({f.spec(), {all.begin(), all.end()}});
    }
    return out;
}

}  // namespace xtel::metrics
