#include "exporters/prometheus/prometheus_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <utility>

#include "xtel/exporters/prometheus.hpp"
#include "xtel/names.hpp"

namespace xtel::detail {

namespace {

struct builtin_family {
    event_name event;  ///< empty for the exporter's own counter
    std::string_view name;
    family_type type;
    std::string_view help;
    /// Made from transfer records by the legacy builder instead: the events are passed over
    /// (folding both would count each transfer twice) and the name is kept for that builder.
    bool from_transfers = false;
};

// Ordered by how often the flusher meets them: every transfer brings its times and its bytes.
constexpr builtin_family builtins[] = {
    {names::agent_xfer_time, "agent_xfer_time", family_type::histogram,
     "Transfer time in microseconds, from post to completion."},
    {names::agent_xfer_post_time, "agent_xfer_post_time", family_type::histogram,
     "Time to post a transfer, in microseconds."},
    {names::agent_tx_bytes, "agent_tx_bytes_total", family_type::counter,
     "Bytes the agent transmitted.", true},
    {names::agent_tx_requests_num, "agent_tx_requests_num_total", family_type::counter,
     "Transmit requests the agent completed.", true},
    {names::agent_rx_bytes, "agent_rx_bytes_total", family_type::counter,
     "Bytes the agent received.", true},
    {names::agent_rx_requests_num, "agent_rx_requests_num_total", family_type::counter,
     "Receive requests the agent completed.", true},
    {names::agent_memory_registered, "agent_memory_registered", family_type::gauge,
     "Bytes of memory registered, as the agent last reported it."},
    {names::agent_memory_deregistered, "agent_memory_deregistered", family_type::gauge,
     "Bytes of memory deregistered, as the agent last reported it."},
    {names::telemetry_events_dropped, "telemetry_events_dropped_total", family_type::counter,
     "Telemetry events dropped because a per-thread staging ring was full."},
    {event_name{}, "telemetry_prometheus_ignored_events_total", family_type::counter,
     "Events the Prometheus exporter did not fold into a family: a value kind the family's "
     "type does not take, a name that collides with another family, or a name past the limit "
     "of distinct names."},
};

constexpr std::uint32_t builtin_count = std::size(builtins);
constexpr std::uint32_t ignored_builtin = builtin_count - 1;

// NIXL_TELEMETRY_PROMETHEUS_BUILDERS is checked against the names the settings list; the
// processor must have a builder of each.
constexpr bool same_builders() {
    const auto& have = prometheus_agent::transfer_processor::builder_names;
    const auto& said = prometheus_settings::known_builders;
    if (std::size(have) != std::size(said)) {
        return false;
    }
    for (std::size_t i = 0; i < std::size(have); ++i) {
        if (have[i] != said[i]) {
            return false;
        }
    }
    return true;
}
static_assert(same_builders(),
              "prometheus_settings::known_builders names the processor's builders");

constexpr std::string_view type_name(family_type t) {
    switch (t) {
        case family_type::counter:
            return "counter";
        case family_type::gauge:
            return "gauge";
        case family_type::histogram:
            return "histogram";
        case family_type::summary:
            return "summary";
    }
    return "untyped";
}

/// The names a family's lines and metadata use.
std::vector<std::string> sample_names_of(const std::string& name, family_type type) {
    switch (type) {
        case family_type::counter:
        case family_type::gauge:
            return {name};
        case family_type::summary:
            return {name, name + "_sum", name + "_count"};
        case family_type::histogram:
            return {name, name + "_bucket", name + "_sum", name + "_count"};
    }
    return {name};
}

/// Length of the valid UTF-8 sequence at the start of `s`, or 0.
std::size_t utf8_sequence(std::string_view s) {
    const auto b0 = static_cast<unsigned char>(s[0]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b0 < 0x80) {
        return 1;
    } else if ((b0 & 0xE0) == 0xC0) {
        n = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4;
        cp = b0 & 0x07;
    } else {
        return 0;
    }
    if (s.size() < n) {
        return 0;
    }
    for (std::size_t i = 1; i < n; ++i) {
        const auto b = static_cast<unsigned char>(s[i]);
        if ((b & 0xC0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    constexpr std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
    const bool overlong = cp < min_for_length[n];
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    return overlong || surrogate || cp > 0x10FFFF ? 0 : n;
}

/// Escapes for the exposition format; bytes that are not UTF-8 become U+FFFD, since
/// Prometheus rejects a whole scrape over one invalid label value.
std::string escape(std::string_view in, bool quote) {
    std::string out;
    out.reserve(in.size());
    while (!in.empty()) {
        const std::size_t n = utf8_sequence(in);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            in.remove_prefix(1);
            continue;
        }
        const char c = in[0];
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && quote) {
            out += "\\\"";
        } else {
            out.append(in.data(), n);
        }
        in.remove_prefix(n);
    }
    return out;
}

std::string format_bound(double b) {
    if (b == std::floor(b) && b < 1e15) {
        return fmt::format("{}", static_cast<std::uint64_t>(b));
    }
    return fmt::format("{}", b);
}

std::shared_ptr<const bucket_layout> make_layout(std::vector<double> bounds) {
    auto layout = std::make_shared<bucket_layout>();
    layout->le.reserve(bounds.size());
    for (const double b : bounds) {
        layout->le.push_back(format_bound(b));
    }
    layout->bounds = std::move(bounds);
    return layout;
}

void append_number(std::string& out, std::uint64_t v) {
    const fmt::format_int f(v);
    out.append(f.data(), f.size());
}

/// v / 10^decimals, exactly: 450 with 6 decimals is 0.000450.
void append_scaled(std::string& out, std::uint64_t v, std::uint8_t decimals) {
    if (decimals == 0) {
        append_number(out, v);
        return;
    }
    std::uint64_t scale = 1;
    for (std::uint8_t i = 0; i < decimals; ++i) {
        scale *= 10;
    }
    append_number(out, v / scale);
    out += '.';
    const fmt::format_int frac(v % scale);
    out.append(decimals - frac.size(), '0');
    out.append(frac.data(), frac.size());
}

/// `,name="value"...` for a processor series, escaped.
std::string render_labels(std::span<const std::string> names, std::span<const std::string> values) {
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
        out += ',';
        out += names[i];
        out += "=\"";
        out += escape_label_value(values[i]);
        out += '"';
    }
    return out;
}

void append_line(std::string& out,
                 const std::string& name,
                 std::string_view suffix,
                 const std::string& labels,
                 std::uint64_t value) {
    out += name;
    out += suffix;
    out += '{';
    out += labels;
    out += "} ";
    append_number(out, value);
    out += '\n';
}

void append_series(std::string& out, const agent_snapshot& agent, const family_values& f) {
    const std::string& name = f.desc->name;
    if (f.labelled) {
        for (const labelled_value& s : f.series) {
            out += name;
            out += '{';
            out += agent.labels;
            out += *s.labels;
            out += "} ";
            append_scaled(out, s.value, f.desc->decimals);
            out += '\n';
        }
        return;
    }
    switch (f.desc->type) {
        case family_type::counter:
        case family_type::gauge:
            append_line(out, name, "", agent.labels, f.value);
            return;
        case family_type::histogram: {
            const auto& le = agent.layout->le;
            std::uint64_t cumulative = 0;
            for (std::size_t i = 0; i < le.size() && i < f.buckets.size(); ++i) {
                cumulative += f.buckets[i];
                out += name;
                out += "_bucket{";
                out += agent.labels;
                out += ",le=\"";
                out += le[i];
                out += "\"} ";
                append_number(out, cumulative);
                out += '\n';
            }
            out += name;
            out += "_bucket{";
            out += agent.labels;
            out += ",le=\"+Inf\"} ";
            append_number(out, f.count);
            out += '\n';
            [[fallthrough]];
        }
        case family_type::summary:
            append_line(out, name, "_sum", agent.labels, f.sum);
            append_line(out, name, "_count", agent.labels, f.count);
            return;
    }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
    return escape(value, true);
}

std::string escape_help(std::string_view text) {
    return escape(text, false);
}

std::string sanitize_metric_name(std::string_view name) {
    std::string out;
    out.reserve(name.size() + 1);
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
        out += '_';
    }
    for (const char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == ':';
        out += ok ? c : '_';
    }
    return out;
}

prometheus_agent::prometheus_agent(std::string agent_name,
                                   std::string_view hostname,
                                   std::vector<double> bounds,
                                   const std::vector<std::string>& builders,
                                   std::size_t max_series)
    : agent_name_(std::move(agent_name)),
      labels_(fmt::format("agent_name=\"{}\",hostname=\"{}\"",
                          escape_label_value(agent_name_),
                          escape_label_value(hostname))),
      layout_(make_layout(std::move(bounds))),
      table_(std::make_shared<family_table>()) {
    for (const auto& b : builtins) {
        add_family(std::string(b.name), escape_help(b.help), b.type, !b.from_transfers);
    }
    sample_names_.emplace(std::string(metrics::metric_store::folded_family), processor_owned);
    metrics::processor_options opts;
    opts.max_series = max_series;
    opts.reserved_labels = {"agent_name", "hostname"};
    opts.check = [this](const metrics::family_spec& spec) { reserve_name(spec); };
    opts.builders = builders;
    processor_ = std::make_unique<transfer_processor>(
        metrics::context{agent_name_, std::string(hostname)}, metrics::default_attributes(), opts);
    publish();
}

void prometheus_agent::reserve_name(const metrics::family_spec& spec) {
    const auto it = sample_names_.find(spec.name);
    if (it == sample_names_.end()) {
        sample_names_.emplace(spec.name, processor_owned);
        return;
    }
    // The legacy builder's families take the names the event path keeps for them.
    const bool kept = it->second < builtin_count && builtins[it->second].from_transfers &&
                      spec.type == metrics::metric_type::counter && spec.label_names.empty();
    if (!kept) {
        throw metrics::metrics_error(fmt::format(
            "metric family '{}' is refused: agent '{}' already serves a family that uses the "
            "name; expected a name of its own",
            spec.name, agent_name_));
    }
}

void prometheus_agent::apply_transfers(std::span<const transfer_record> transfers,
                                       const label_table& labels) {
    if (transfers.empty()) {
        return;
    }
    const std::lock_guard lock(state_mutex_);
    processor_->process(transfers, labels);
    dirty_ = true;
}

void prometheus_agent::add_builder(std::unique_ptr<metrics::builder> b) {
    const std::lock_guard lock(state_mutex_);
    processor_->add_builder(std::move(b));
    dirty_ = true;
}

void prometheus_agent::sync_processor_families() {
    const auto families = processor_->store().families();
    for (std::size_t i = processor_families_.size(); i < families.size(); ++i) {
        const auto& spec = families[i].spec();
        const family_desc& desc = table_->descs.emplace_back(family_desc{
            spec.name, escape_help(spec.help),
            spec.type == metrics::metric_type::counter ? family_type::counter : family_type::gauge,
            spec.decimals});
        processor_families_.push_back({&desc, {}});
        const auto pos = std::lower_bound(processor_order_.begin(), processor_order_.end(),
                                          desc.name, [this](std::uint32_t f, const std::string& n) {
                                              return processor_families_[f].desc->name < n;
                                          });
        processor_order_.insert(pos, static_cast<std::uint32_t>(i));
    }
    for (std::size_t i = 0; i < families.size(); ++i) {
        auto& labels = processor_families_[i].labels;
        const auto series = families[i].all_series();
        for (std::size_t j = labels.size(); j < series.size(); ++j) {
            labels.push_back(&table_->labels.emplace_back(
                render_labels(families[i].spec().label_names, series[j].label_values)));
        }
    }
}

void prometheus_agent::apply(std::span<const event> batch) {
    const std::lock_guard lock(state_mutex_);
    for (const event& e : batch) {
        apply_one(e);
    }
}

void prometheus_agent::apply_one(const event& e) {
    const std::uint32_t index = find_or_add(e);
    if (index == rejected) {
        ignore();
        return;
    }
    if (index < builtin_count && builtins[index].from_transfers) {
        return;
    }
    family_values& f = values_[index];
    const bool builtin = index < builtin_count;
    switch (f.desc->type) {
        case family_type::counter:
            // A built-in counter also takes a plain sample as an increment: NIXL records one
            // event per transfer. A gauge (a level) cannot be added to a counter.
            if (e.kind == value_kind::counter || (builtin && e.kind == value_kind::sample)) {
                f.value += e.value;
            } else {
                ignore();
                return;
            }
            break;
        case family_type::gauge:
            if (e.kind == value_kind::gauge || (builtin && e.kind == value_kind::sample)) {
                f.value = e.value;
            } else if (builtin && e.kind == value_kind::counter) {
                // Memory sent as increments accumulates: registered minus deregistered is then
                // what is registered now.
                f.value += e.value;
            } else {
                ignore();
                return;
            }
            break;
        case family_type::histogram: {
            const auto& bounds = layout_->bounds;
            const auto it =
                std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(e.value));
            if (it != bounds.end()) {
                ++f.buckets[static_cast<std::size_t>(it - bounds.begin())];
            }
            f.sum += e.value;
            ++f.count;
            break;
        }
        case family_type::summary:
            if (e.kind != value_kind::sample) {
                ignore();
                return;
            }
            f.sum += e.value;
            ++f.count;
            break;
    }
    dirty_ = true;
}

void prometheus_agent::ignore() noexcept {
    ++values_[ignored_builtin].value;
    dirty_ = true;
}

std::uint32_t prometheus_agent::find_or_add(const event& e) {
    // Names are NUL-padded to a fixed width, so equal names are equal bytes: a few vector
    // compares each. The character-wise loop below catches a name with stray padding.
    for (std::uint32_t i = 0; i < ignored_builtin; ++i) {
        if (std::memcmp(&builtins[i].event, &e.name, sizeof(event_name)) == 0) {
            return i;
        }
    }
    const std::string_view text = e.name_view();
    for (std::uint32_t i = 0; i < ignored_builtin; ++i) {
        if (builtins[i].event.view() == text) {
            return i;
        }
    }
    if (const auto it = dynamic_.find(text); it != dynamic_.end()) {
        return it->second;
    }
    if (dynamic_count_ >= prometheus_settings::max_dynamic_families) {
        return rejected;
    }
    const family_type type = e.kind == value_kind::counter ? family_type::counter
                             : e.kind == value_kind::gauge ? family_type::gauge
                                                           : family_type::summary;
    std::string name = sanitize_metric_name(text);
    if (type == family_type::counter && !name.ends_with("_total")) {
        name += "_total";
    }
    std::uint32_t index = rejected;
    if (const auto owner = sample_names_.find(name); owner != sample_names_.end()) {
        // Names that differ only in characters the metric alphabet lacks share a family.
        if (owner->second < values_.size() && owner->second >= builtin_count) {
            const family_desc& d = *values_[owner->second].desc;
            if (d.name == name && d.type == type) {
                index = owner->second;
            }
        }
    } else if (names_free(name, type)) {
        constexpr std::string_view how[] = {"counter increments", "the last level set", "histogram",
                                            "sum and count of samples"};
        const auto help = fmt::format("{} event {}: {}.", to_string(e.cat), text,
                                      how[static_cast<std::size_t>(type)]);
        index = add_family(std::move(name), escape_help(help), type, true);
    }
    dynamic_.emplace(std::string(text), index);
    ++dynamic_count_;
    return index;
}

bool prometheus_agent::names_free(const std::string& name, family_type type) const {
    const auto wanted = sample_names_of(name, type);
    return std::none_of(wanted.begin(), wanted.end(),
                        [this](const std::string& n) { return sample_names_.contains(n); });
}

std::uint32_t prometheus_agent::add_family(std::string name,
                                           std::string help,
                                           family_type type,
                                           bool listed) {
    const auto index = static_cast<std::uint32_t>(values_.size());
    for (auto& n : sample_names_of(name, type)) {
        sample_names_.emplace(std::move(n), index);
    }
    const family_desc& desc =
        table_->descs.emplace_back(family_desc{std::move(name), std::move(help), type});
    family_values& v = values_.emplace_back();
    v.desc = &desc;
    if (type == family_type::histogram) {
        v.buckets.assign(layout_->bounds.size(), 0);
    }
    if (!listed) {
        return index;
    }
    const auto pos = std::lower_bound(
        order_.begin(), order_.end(), desc.name,
        [this](std::uint32_t i, const std::string& n) { return values_[i].desc->name < n; });
    order_.insert(pos, index);
    return index;
}

void prometheus_agent::publish() {
    const std::lock_guard lock(state_mutex_);
    if (!dirty_) {
        return;
    }
    sync_processor_families();
    auto snap = std::make_shared<agent_snapshot>();
    snap->agent_name = agent_name_;
    snap->labels = labels_;
    snap->layout = layout_;
    snap->table = table_;
    snap->families.reserve(order_.size() + processor_order_.size());
    const auto families = processor_->store().families();
    const auto processor_values = [&](std::uint32_t f) {
        family_values v;
        v.desc = processor_families_[f].desc;
        v.labelled = true;
        const auto series = families[f].all_series();
        v.series.reserve(series.size());
        for (std::size_t j = 0; j < series.size(); ++j) {
            v.series.push_back({processor_families_[f].labels[j], series[j].value});
        }
        return v;
    };
    // Both lists are sorted by name, and no name is in both (reserve_name): merge them.
    auto b = order_.begin();
    auto p = processor_order_.begin();
    while (b != order_.end() || p != processor_order_.end()) {
        const bool take_builtin =
            p == processor_order_.end() ||
            (b != order_.end() && values_[*b].desc->name < processor_families_[*p].desc->name);
        if (take_builtin) {
            snap->families.push_back(values_[*b++]);
        } else if (families[*p].all_series().empty()) {
            ++p;  // a family without series yet is not shown
        } else {
            snap->families.push_back(processor_values(*p++));
        }
    }
    std::shared_ptr<const agent_snapshot> previous = std::move(snap);
    {
        const std::lock_guard lock(published_mutex_);
        published_.swap(previous);
    }
    dirty_ = false;
}

std::shared_ptr<const agent_snapshot> prometheus_agent::snapshot() const {
    const std::lock_guard lock(published_mutex_);
    return published_;
}

void render(std::span<const std::shared_ptr<const agent_snapshot>> agents, std::string& out) {
    std::vector<std::size_t> pos(agents.size(), 0);
    while (true) {
        const family_desc* head = nullptr;
        for (std::size_t a = 0; a < agents.size(); ++a) {
            const auto& families = agents[a]->families;
            if (pos[a] < families.size() &&
                (head == nullptr || families[pos[a]].desc->name < head->name)) {
                head = families[pos[a]].desc;
            }
        }
        if (head == nullptr) {
            return;
        }
        out += "# HELP ";
        out += head->name;
        out += ' ';
        out += head->help;
        out += "\n# TYPE ";
        out += head->name;
        out += ' ';
        out += type_name(head->type);
        out += '\n';
        for (std::size_t a = 0; a < agents.size(); ++a) {
            const auto& families = agents[a]->families;
            if (pos[a] < families.size() && families[pos[a]].desc->name == head->name) {
                if (families[pos[a]].desc->type == head->type) {
                    append_series(out, *agents[a], families[pos[a]]);
                }
                ++pos[a];
            }
        }
    }
}

}  // namespace xtel::detail
