#pragma once
/// NIXL's events, one flush of them, as xtel's pipeline takes them: whole transfers where
/// NIXL's events of one transfer arrive together, events for the rest.
///
/// A completed transfer is up to four NIXL events pushed together (XFER_POST_TIME, XFER_TIME,
/// TX_BYTES or RX_BYTES, TX_REQUESTS_NUM or RX_REQUESTS_NUM in NIXL 1.5.1; each only when
/// NIXL_TELEMETRY_ENABLED_METRICS keeps it), which NIXL's staging queue keeps adjacent. A run of
/// adjacent transfer events in which no role repeats and the direction agrees is one transfer:
/// the metric model's transfer families (bytes, requests, the latency histograms) are made from
/// transfer records, never from loose byte events. Bytes and requests are NIXL's, exactly,
/// however the events are grouped; the histograms are right when a transfer's events come in one
/// flush (NIXL 1.5: a NIXL without batch hooks hands each event alone, and a transfer's times
/// then reach the histograms apart from its bytes). NIXL's events carry no time: each is stamped
/// with the flush's.

#include <cstdint>
#include <span>
#include <vector>

#include "xtel/core/event.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/nixl/abi_v2.hpp"

namespace xtel::nixl {

/// One flush's events in xtel's form.
struct mapped_flush {
    std::vector<event> events;
    std::vector<transfer_record> transfers;
    /// Events of a kind xtel's model has no name for (five of NIXL's twelve error kinds: not
    /// posted, mismatch, repost active, unknown, no telemetry) or of a type NIXL does not
    /// define: counted, not served.
    std::uint64_t unmapped = 0;

    void clear() noexcept {
        events.clear();
        transfers.clear();
        unmapped = 0;
    }
};

/// Appends the xtel form of `in`, one flush's NIXL events in NIXL's order, to `out`, every
/// record and event stamped `now_us`.
void map_flush(std::span<const abi_v2::event> in, std::uint64_t now_us, mapped_flush& out);

}  // namespace xtel::nixl
