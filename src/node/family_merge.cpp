// The collector's merge of the agents' files into one node: the families each file keeps, as
// --metrics chooses them, the first file by name gives their type, the program's own names and
// OpenMetrics's names allow. What changes here is the cross-agent rule, never a file's trust.

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/log.hpp"
#include "xtel/metrics/agent_metrics_settings.hpp"
#include "xtel/metrics/openmetrics_names.hpp"
#include "xtel/node/collector.hpp"

namespace xtel::node {

/// Where each family of the chosen files was first seen, and which families take no part.
struct collector::family_types {
    std::unordered_map<std::string_view, family_origin> first;
    /// Families --metrics leaves out: no type, no OpenMetrics name.
    std::unordered_set<std::string_view> not_chosen;
    /// Families an OpenMetrics body of them all would leave out (openmetrics_names.hpp).
    std::unordered_set<std::string_view> clashing;
};

namespace {

/// The families of `all` (name, type) whose OpenMetrics names a family before them by name
/// claims: files of agents that each made valid families can still clash with each other there.
std::unordered_set<std::string_view> openmetrics_clashes(
    std::vector<std::pair<std::string_view, metrics::metric_type>> all) {
    std::sort(all.begin(), all.end());
    std::unordered_set<std::string_view> clashing;
    metrics::openmetrics_claims claims;
    for (const auto& [family, type] : all) {
        if (claims.claim(family, type) == metrics::openmetrics_form::left_out) {
            clashing.insert(family);
        }
    }
    return clashing;
}

/// `latest` less the families `left_out` (sorted) names.
std::shared_ptr<const metrics::snapshot> without(const metrics::snapshot& latest,
                                                 const std::vector<std::string>& left_out) {
    auto copy = std::make_shared<metrics::snapshot>();
    copy->labels = latest.labels;
    copy->start_time_us = latest.start_time_us;
    for (const auto& f : latest.families) {
        if (!std::binary_search(left_out.begin(), left_out.end(), f.spec.name)) {
            copy->families.push_back(f);
        }
    }
    return copy;
}

}  // namespace

bool collector::chosen_family(std::string_view family) {
    const auto& globs = settings_.families;
    if (globs.empty() || std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
            return metrics::glob_matches(g, family);
        })) {
        return true;
    }
    if (not_chosen_.size() < max_logged_not_chosen && not_chosen_.emplace(family).second) {
        xtel::detail::log(log_level::info, "{}: family {} is not served: --metrics leaves it out",
                          settings_.program, family);
    }
    return false;
}

collector::family_types collector::types_of(
    const std::vector<std::pair<const std::string*, source*>>& chosen) {
    family_types t;
    for (const auto& reserved : settings_.reserved_families) {
        t.first.try_emplace(reserved, family_origin{metrics::metric_type::gauge, nullptr});
    }
    for (const auto& [name, s] : chosen) {
        for (const auto& f : s->latest->families) {
            if (t.not_chosen.contains(f.spec.name)) {
                continue;
            }
            if (!chosen_family(f.spec.name)) {
                t.not_chosen.insert(f.spec.name);
                continue;
            }
            t.first.try_emplace(f.spec.name, family_origin{f.spec.type, name});
        }
    }
    std::vector<std::pair<std::string_view, metrics::metric_type>> all;
    all.reserve(t.first.size());
    for (const auto& [family, seen] : t.first) {
        all.emplace_back(family, seen.type);
    }
    t.clashing = openmetrics_clashes(std::move(all));
    return t;
}

void collector::report_left_out(const std::string& file,
                                const metrics::family_snapshot& f,
                                const family_origin& first) {
    const auto path = (settings_.dir / file).string();
    if (first.file == nullptr) {
        ++left_out_[static_cast<std::size_t>(left_out::reserved_name)];
        xtel::detail::log(log_level::warning,
                          "{}: {}: family {} is left out: {} serves a family of that name itself",
                          settings_.program, path, f.spec.name, settings_.program);
        return;
    }
    if (first.type == f.spec.type) {
        ++left_out_[static_cast<std::size_t>(left_out::name_clash)];
        xtel::detail::log(log_level::warning,
                          "{}: {}: family {} is left out: in OpenMetrics its names are those of a "
                          "family another agent's file serves",
                          settings_.program, path, f.spec.name);
        return;
    }
    ++left_out_[static_cast<std::size_t>(left_out::type_conflict)];
    xtel::detail::log(log_level::warning,
                      "{}: {}: family {} is left out: it is a {} here, and {} (whose name sorts "
                      "first) serves it as a {}",
                      settings_.program, path, f.spec.name, metrics::to_string(f.spec.type),
                      (settings_.dir / *first.file).string(), metrics::to_string(first.type));
}

void collector::resolve_type_conflicts(
    const std::vector<std::pair<const std::string*, source*>>& chosen) {
    const family_types types = types_of(chosen);
    std::vector<std::string> conflicts;
    for (const auto& [name, s] : chosen) {
        conflicts.clear();
        for (const auto& f : s->latest->families) {
            if (types.not_chosen.contains(f.spec.name)) {
                conflicts.push_back(f.spec.name);
                continue;
            }
            const auto& first = types.first.find(f.spec.name)->second;
            if (!types.clashing.contains(f.spec.name) && first.file != nullptr &&
                (first.file == name || first.type == f.spec.type)) {
                continue;
            }
            conflicts.push_back(f.spec.name);
            if (!std::binary_search(s->left_out.begin(), s->left_out.end(), f.spec.name)) {
                report_left_out(*name, f, first);  // not reported yet: it starts now
            }
        }
        // Families are sorted by name in a snapshot, so conflicts is too.
        if (conflicts.empty()) {
            s->served.reset();
            s->left_out.clear();
            continue;
        }
        if (s->served && conflicts == s->left_out) {
            continue;  // the same copy as at the last refresh (`served` is reset by a new read)
        }
        s->served = without(*s->latest, conflicts);
        s->left_out = conflicts;
    }
}

}  // namespace xtel::node
