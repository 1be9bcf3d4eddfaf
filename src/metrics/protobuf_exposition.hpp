#pragma once
/// Prometheus's protobuf exposition format (private to src/metrics/; reached through
/// render(..., exposition::protobuf)): the body is a sequence of io.prometheus.client.MetricFamily
/// messages, each preceded by its length as a varint. The wire encoding is written here by hand,
/// so that the metrics component needs no protobuf library; the tests decode it with
/// libprotobuf (proto/prometheus_metrics.proto).
///
/// Families merge across snapshots as in the text formats (exposition_walk.hpp). Series become
/// Metric messages: the snapshot's labels, then the family's; values, sums, bounds and exemplar
/// values divided by 10^decimals as doubles (the double nearest the decimal the text shows);
/// the snapshot's start time as the created timestamp of counters, summaries and histograms.
/// A classic histogram has one Bucket per bound and the +Inf bucket, cumulative, each with
/// its exemplar (labels as OpenMetrics shows them). A native histogram (family_spec::native)
/// has schema, zero_threshold (always set, 2^-128), zero_count, positive_span and
/// positive_delta; one with no observation outside the zero bucket has one empty span.
///
/// Prometheus 2.42 reads a whole MetricFamily as native histograms when its FIRST Metric has a
/// zero_threshold above 0 (or deltas, or a zero count), and as classic ones otherwise: the
/// always-set zero_threshold makes a native series without observations read as native, and a
/// merged family whose snapshots disagree on `native` is written as one MetricFamily per run
/// of snapshots that agree, each of which Prometheus reads right. A native-only histogram has
/// no Bucket (its exemplar goes in Histogram.exemplars); one kept both ways has its classic
/// buckets and the native fields in one Histogram.
///
/// Fields equal to their proto3 default are not written, and fields are in field-number order:
/// the bytes are those libprotobuf writes for the same messages.

#include <memory>
#include <span>
#include <string>

#include "xtel/metrics/snapshot.hpp"

namespace xtel::metrics::detail {

/// Appends the protobuf exposition of `snapshots` to `out`.
void render_protobuf(std::span<const std::shared_ptr<const snapshot>> snapshots, std::string& out);

}  // namespace xtel::metrics::detail
