#pragma once
// Straggler peers in `xtel top`, by the rule of monitoring/rules (docs/monitoring.md): a peer
// whose p99 transfer time for an operation is more than k = 3 times the median p99 of the node's
// peers for that operation and more than 0.5 ms above it, counting only peers with at least 100
// timed transfers in the window, and only when at least 3 such peers share the operation. The
// window is up to five minutes of this xtel top's readings, as the rules' [5m]. Nothing here reads
// a file.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "top_view.hpp"

namespace xtel::top {

/// The node's timed transfers by (operation, remote_agent): every agent's series added up.
using peer_histograms = std::map<std::pair<std::string, std::string>, latency_histogram>;

/// Adds the xtel_transfer_duration_seconds series of `s` into `into`, by their operation and
/// remote_agent labels (their native buckets when the family keeps only those: no bounds); a
/// snapshot without the family adds nothing, a peer's series of another form than the first
/// added are left out.
void add_peer_histograms(const metrics::snapshot& s, peer_histograms& into);

/// The rule's numbers.
struct straggler_rule {
    double k = 3.0;  ///< how many times the median p99 makes a straggler
    /// How far above the median, in seconds, a p99 must also be: closer is host noise.
    double margin = 0.0005;
    std::uint64_t min_timed = 100;  ///< timed transfers behind a peer's p99 in the window
    std::size_t min_peers = 3;      ///< peers of an operation that must qualify
};

/// A peer flagged for one operation.
struct straggler {
    std::string operation;
    std::string remote_agent;
    double p99 = 0;           ///< seconds
    double median = 0;        ///< the median p99 of the operation's peers, seconds
    double ratio = 0;         ///< p99 / median
    std::uint64_t timed = 0;  ///< timed transfers in the window
};

/// The stragglers among `delta` (the transfers timed over `window`), by operation then peer.
std::vector<straggler> find_stragglers(const peer_histograms& delta,
                                       std::chrono::duration<double> window,
                                       const straggler_rule& rule = {});

/// Keeps the node's per-peer histograms for up to `window`, to compare the latest reading with
/// the oldest one in it (rate over [5m], as the rules do).
class straggler_tracker {
  public:
    explicit straggler_tracker(std::chrono::seconds window = std::chrono::minutes(5))
        : window_(window) {}

    /// The stragglers over the readings kept, `now` read at `at` included. A bucket that went
    /// back (an agent gone or restarted) counts from 0.
    std::vector<straggler> update(peer_histograms now, clock::time_point at);

  private:
    std::chrono::seconds window_;
    std::deque<std::pair<clock::time_point, peer_histograms>> readings_;
};

/// The frame's line for `s`: "straggler  write to pair3-target  p99 9.52ms = 12.1x the median
/// 787us".
std::string straggler_line(const straggler& s);

}  // namespace xtel::top
