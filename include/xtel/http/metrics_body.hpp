#pragma once
/// The body of GET /metrics, as the in-process Prometheus endpoint and xtel-exporter serve it:
/// the snapshots shown, rendered in the representation a request negotiated (negotiate.hpp),
/// gzipped when it accepts that, and kept, so that every answer until the snapshots change
/// shares one body per representation.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xtel/http/negotiate.hpp"
#include "xtel/http/server.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::http {

/// The bodies of one set of snapshots in each representation, each rendered (and compressed)
/// when first asked for. Not locked: its owner holds one lock across show() and answer(), so
/// that concurrent scrapes of unchanged snapshots wait for one rendering and share its body.
class metrics_body {
  public:
    using snapshots = std::vector<std::shared_ptr<const metrics::snapshot>>;
    /// Told the number of families an OpenMetrics rendering left out (their names clash there
    /// between the snapshots' families; the text format serves them), when it left some out.
    using left_out_fn = std::function<void(std::size_t families)>;

    /// The gzip level of compressed bodies: 1, the fastest, since a body is rendered again
    /// every flush round; docs/performance.md has what it costs and saves next to level 6.
    static constexpr int default_gzip_level = 1;

    explicit metrics_body(int gzip_level = default_gzip_level, left_out_fn on_left_out = {});

    /// Shows `from` from now on. The bodies kept are dropped unless `from` holds the same
    /// snapshots as before, in the same order: compared by pointer, since a published snapshot
    /// never changes. True when they were dropped.
    bool show(snapshots from);
    /// The snapshots shown.
    const snapshots& shown() const noexcept { return shown_; }

    /// The body of what is shown in `r`: the one kept, or rendered now. A gzip body is made
    /// from the plain one, which is kept too: a scraper that asks for both pays one rendering.
    std::shared_ptr<const std::string> body(representation r);
    /// body(r) as a 200 answer's entity, with its Content-Type.
    entity answer(representation r);

    /// Renderings (of plain bodies) and compressions (of gzip ones) done so far.
    std::uint64_t renderings() const noexcept { return renderings_; }
    std::uint64_t compressions() const noexcept { return compressions_; }

  private:
    int gzip_level_;
    left_out_fn on_left_out_;
    snapshots shown_;
    /// By index_of(representation); null: not rendered since shown_ changed.
    std::array<std::shared_ptr<const std::string>, representation_count> kept_;
    /// The size each representation last had, to reserve for the next rendering.
    std::array<std::size_t, representation_count> last_size_{};
    std::uint64_t renderings_ = 0;
    std::uint64_t compressions_ = 0;
};

}  // namespace xtel::http
