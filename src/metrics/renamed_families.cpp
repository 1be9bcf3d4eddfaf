#include "xtel/metrics/renamed_families.hpp"

#include <algorithm>
#include <string>

#include "xtel/metrics/agent_metrics_settings.hpp"

namespace xtel::metrics {

void add_old_names(snapshot& s) {
    const auto by_name = [](const family_snapshot& f, std::string_view name) {
        return f.spec.name < name;
    };
    for (const renamed_family& r : renamed_families) {
        const auto now =
            std::lower_bound(s.families.begin(), s.families.end(), r.new_name, by_name);
        if (now == s.families.end() || now->spec.name != r.new_name) {
            continue;
        }
        const auto at = std::lower_bound(s.families.begin(), s.families.end(), r.old_name, by_name);
        if (at != s.families.end() && at->spec.name == r.old_name) {
            continue;
        }
        family_snapshot old = *now;
        old.spec.name = r.old_name;
        old.spec.help = "Renamed " + std::string(r.new_name) + " (served under this name while " +
                        env::compat_names + " is set): " + old.spec.help;
        s.families.insert(at, std::move(old));
    }
}

}  // namespace xtel::metrics
