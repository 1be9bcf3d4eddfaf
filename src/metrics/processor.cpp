#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "core/log.hpp"
#include "xtel/metrics/processor.hpp"

namespace xtel::metrics::detail {

namespace {

std::uint64_t hash(const transfer_attributes& a, direction dir) noexcept {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    std::memcpy(&lo, &a, 8);
    std::memcpy(&hi, reinterpret_cast<const char*>(&a) + 8, 8);
    std::uint64_t h = (lo ^ (hi * 0x9E3779B97F4A7C15ull) ^ static_cast<std::uint64_t>(dir)) *
                      0xFF51AFD7ED558CCDull;
    return h ^ (h >> 32);
}

constexpr std::size_t initial_slots = 64;

/// Whether attributes `a` and direction `dir` are group `g`'s: the 16 bytes of attributes (no
/// padding: the size is asserted where they are declared) compared as two words.
bool same_group(const group_state& g, const transfer_attributes& a, direction dir) noexcept {
    return std::memcmp(&g.attrs, &a, sizeof a) == 0 && g.dir == dir;
}

}  // namespace

processor_core::processor_core(metrics::context ctx,
                               attribute_registry registry,
                               const processor_options& opts)
    : ctx_(std::move(ctx)),
      registry_(std::move(registry)),
      max_cached_groups_(opts.max_cached_groups),
      store_(store_options{opts.max_series, opts.reserved_labels, opts.check}) {
    check_transfer_keys(registry_);
}

void processor_core::reset() {
    groups_.clear();
    slots_.assign(initial_slots, 0);
    touched_.clear();
    last_ = UINT32_MAX;
}

void processor_core::begin_group(const label_table& labels) {
    // What the previous batch added has been built; its sums start again.
    for (const std::uint32_t i : touched_) {
        groups_[i].totals = {};
    }
    touched_.clear();
    if (labels_ != &labels || groups_.size() >= max_cached_groups_ || slots_.empty()) {
        reset();
        labels_ = &labels;
    }
}

measurements& processor_core::totals_of(const transfer_attributes& attrs, direction dir) {
    // Consecutive inputs mostly share a group: that test here, the lookup out of line.
    const std::uint32_t i = last_ < groups_.size() && same_group(groups_[last_], attrs, dir)
                                ? last_
                                : find_or_add(attrs, dir);
    measurements& m = groups_[i].totals;
    if (m.transfers == 0) {
        touched_.push_back(i);
    }
    return m;
}

void processor_core::end_group(const label_table& labels) {
    for (const std::uint32_t i : touched_) {
        group_state& g = groups_[i];
        if (!g.extracted) {
            g.data = extract_telemetry_data(transfer_raw_record(g.attrs, g.dir, labels, ctx_),
                                            registry_);
            g.extracted = true;
        }
    }
}

void processor_core::group(std::span<const transfer_record> records, const label_table& labels) {
    begin_group(labels);
    for (const transfer_record& r : records) {
        measurements& m = totals_of(r.attrs, r.dir);
        m.transfers += 1;
        m.requests += r.requests;
        m.bytes += r.bytes;
        m.xfer_us += r.xfer_us;
        m.post_us += r.post_us;
        m.timed += r.timed ? 1 : 0;
    }
    end_group(labels);
}

void processor_core::group(std::span<const transfer_tally> tallies, const label_table& labels) {
    begin_group(labels);
    for (const transfer_tally& t : tallies) {
        if (t.transfers == 0) {
            continue;  // a group with no transfers would not be listed as touched
        }
        measurements& m = totals_of(t.attrs, t.dir);
        m.transfers += t.transfers;
        m.requests += t.requests;
        m.bytes += t.bytes;
        m.xfer_us += t.xfer_us;
        m.post_us += t.post_us;
        m.timed += t.timed;
    }
    end_group(labels);
}

std::uint32_t processor_core::find_or_add(const transfer_attributes& attrs, direction dir) {
    std::size_t mask = slots_.size() - 1;
    for (std::size_t s = hash(attrs, dir) & mask;; s = (s + 1) & mask) {
        const std::uint32_t slot = slots_[s];
        if (slot == 0) {
            const auto index = static_cast<std::uint32_t>(groups_.size());
            group_state& g = groups_.emplace_back();
            g.attrs = attrs;
            g.dir = dir;
            slots_[s] = index + 1;
            if (groups_.size() * 2 > slots_.size()) {
                // Keep the table at most half full: probes stay short.
                slots_.assign(slots_.size() * 2, 0);
                mask = slots_.size() - 1;
                for (std::uint32_t i = 0; i < groups_.size(); ++i) {
                    std::size_t t = hash(groups_[i].attrs, groups_[i].dir) & mask;
                    while (slots_[t] != 0) {
                        t = (t + 1) & mask;
                    }
                    slots_[t] = i + 1;
                }
            }
            return last_ = index;
        }
        if (same_group(groups_[slot - 1], attrs, dir)) {
            return last_ = slot - 1;
        }
    }
}

void processor_core::add_builder(std::unique_ptr<builder> b) {
    if (b == nullptr) {
        throw metrics_error("add_builder was given no builder (nullptr): expected a builder");
    }
    b->setup(store_, registry_);
    dynamic_.push_back(std::move(b));
}

void processor_core::build_dynamic(const transfer_group& g) noexcept {
    for (const auto& b : dynamic_) {
        try {
            b->build(g, store_);
        } catch (const std::exception& e) {
            if (failures_++ == 0) {
                xtel::detail::log(
                    log_level::warning,
                    "metrics builder '{}' failed: {}; later failures are only counted", b->name(),
                    e.what());
            }
        } catch (...) {
            ++failures_;
        }
    }
}

void check_builder_names(std::span<const std::string> wanted,
                         std::span<const std::string_view> known) {
    for (const auto& w : wanted) {
        if (std::find(known.begin(), known.end(), w) == known.end()) {
            throw metrics_error(fmt::format("builder '{}' is unknown: expected one of {}", w,
                                            fmt::join(known, ", ")));
        }
    }
}

}  // namespace xtel::metrics::detail
