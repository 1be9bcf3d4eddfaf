// decode_snapshot: the header, the snapshot's labels and its families, in order; a family's
// spec and series are read by the stages snapshot_decode.hpp declares.

#include "xtel/metrics/snapshot_codec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>
#include <vector>

#include "metrics/snapshot_codec_layout.hpp"
#include "metrics/snapshot_decode.hpp"
#include "xtel/metrics/metric_store.hpp"

namespace xtel::metrics {

namespace detail::codec {

void reader::fail(std::size_t at, std::string_view what) const {
    std::string where;
    if (family_ != none) {
        where = fmt::format("family {}", family_);
        if (family_name_ != nullptr) {
            where += fmt::format(" ({})", printable(*family_name_));
        }
        if (series_ != none) {
            where += fmt::format(" series {}", series_);
        }
        where += ": ";
    }
    throw snapshot_decode_error(fmt::format("snapshot payload, byte {}: {}{}", at, where, what));
}

namespace {

/// The payload's version, one this reader knows.
std::uint32_t decode_header(reader& r) {
    const auto m = r.bytes(sizeof magic, "the magic");
    if (!std::equal(m.begin(), m.end(), std::begin(magic))) {
        r.fail(0, "the magic is not \"XSNP\": not an encoded snapshot");
    }
    const std::uint32_t version = r.u32("the version");
    if (version < snapshot_codec_oldest_version || version > snapshot_codec_version) {
        r.fail(sizeof magic,
               fmt::format("version {} is unknown: this reader knows versions {} to {}", version,
                           snapshot_codec_oldest_version, snapshot_codec_version));
    }
    return version;
}

void decode_families(reader& r, std::vector<family_snapshot>& out, std::uint32_t version) {
    const std::uint32_t n = r.count("the family count", limits::max_families, min_family);
    out.reserve(n);  // so that the reader may point at a family's name while reading it
    // Every line name written so far (name, name_bucket, ...) -> its family: two families may
    // not write lines of one name (histogram x and gauge x_count), or readers serve one series
    // twice.
    std::unordered_map<std::string, std::uint32_t> lines;
    std::vector<std::size_t> starts;
    std::vector<std::uint64_t> keys, scratch;
    for (std::uint32_t i = 0; i < n; ++i) {
        r.at_family(i, nullptr);
        family_snapshot& f = out.emplace_back();
        const std::size_t at = r.offset();
        decode_spec(r, i, i > 0 ? &out[i - 1].spec : nullptr, version, f.spec);
        for (std::string& line : metric_store::line_names(f.spec.name, f.spec.type)) {
            const auto [it, added] = lines.try_emplace(std::move(line), i);
            if (!added) {
                r.fail(at, fmt::format("its line {} is family {}'s ({}) too: expected each line "
                                       "name in one family",
                                       printable(it->first), it->second,
                                       printable(out[it->second].spec.name)));
            }
        }
        const std::uint32_t series_n =
            r.count("the series count", limits::max_series_per_family, min_series);
        f.series.reserve(series_n);
        starts.resize(series_n);
        keys.resize(series_n);
        for (std::uint32_t j = 0; j < series_n; ++j) {
            r.at_series(j);
            starts[j] = r.offset();
            f.series.push_back(decode_series(r, f.spec, version));
            keys[j] = series_key(f.series.back(), j);
        }
        check_unique_series(r, f, keys, scratch, starts);
    }
    r.at_family(reader::none, nullptr);
}

/// The snapshot's own labels: those of snapshot_label_names, each at most once.
void decode_labels(reader& r, std::vector<label>& out) {
    const std::uint32_t n = r.count("the label count", limits::max_labels, min_label);
    out.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::size_t at = r.offset();
        label& l = out[i];
        l.name = r.string("a label's name");
        if (std::find(std::begin(snapshot_label_names), std::end(snapshot_label_names), l.name) ==
            std::end(snapshot_label_names)) {
            r.fail(at, fmt::format("label {}'s name {} is refused: expected agent_name, rank or "
                                   "local_rank (a reader adds pid and instance itself)",
                                   i, printable(l.name)));
        }
        for (std::uint32_t j = 0; j < i; ++j) {
            if (out[j].name == l.name) {
                r.fail(at, fmt::format("label {}'s name {} is label {}'s too: expected each "
                                       "label once",
                                       i, printable(l.name), j));
            }
        }
        l.value = r.string("a label's value");
    }
}

}  // namespace

}  // namespace detail::codec

snapshot decode_snapshot(std::span<const std::byte> bytes) {
    using namespace detail::codec;
    reader r(bytes);
    const std::uint32_t version = decode_header(r);
    snapshot s;
    decode_labels(r, s.labels);
    decode_families(r, s.families, version);
    if (r.left() != 0) {
        r.fail(r.offset(),
               fmt::format("{} bytes after the last family: expected the end", r.left()));
    }
    return s;
}

}  // namespace xtel::metrics
