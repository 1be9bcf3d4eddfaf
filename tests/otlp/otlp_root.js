'use strict';
// The OTLP message types that the receiver and its self-test use, all from one place: the
// protobufjs static modules that OpenTelemetry JS generates from the OTLP protos and ships in
// @opentelemetry/otlp-transformer. The point of the receiver is that xtel's encoder is checked by
// a decoder that nobody on xtel's team wrote.
//
// The package exports no name for this file, hence the path into its build folder. Releases
// after 0.217.0 no longer ship it (they encode without protobufjs), which is why package.json
// pins that version exactly. 0.217.0's module has the metrics' messages only, so the traces'
// come from 0.216.0, installed under the alias otlp-transformer-traces: the newest release whose
// module has them, and with Span.flags (0.5x releases' modules lack that field, which xtel sends).
const path = require('path');

const generated = require.resolve('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const root = require(generated);
const tracesGenerated = require.resolve('otlp-transformer-traces/build/src/generated/root.js');
const tracesRoot = require(tracesGenerated);
// The protobufjs instance that the generated module itself loaded, not one that a different
// node_modules layout might resolve for this file.
const protobuf = require(
    require.resolve('protobufjs/minimal', { paths: [path.dirname(generated)] }),
);

// Without the long package protobufjs reads 64-bit fields as doubles, which drop digits past 2^53:
// a timestamp or a count would be recorded wrong without any error.
// The same holds for the traces' module, which may load a protobufjs of its own.
const tracesProtobuf = require(
    require.resolve('protobufjs/minimal', { paths: [path.dirname(tracesGenerated)] }),
);
for (const p of [protobuf, tracesProtobuf]) {
    if (!p.util.Long) {
        throw new Error('protobufjs found no "long" package; run npm ci in tests/otlp');
    }
}

const collector = root.opentelemetry.proto.collector.metrics.v1;
const tracesCollector = tracesRoot.opentelemetry.proto.collector.trace.v1;

module.exports = {
    root,
    tracesRoot,
    Long: protobuf.util.Long,
    ExportMetricsServiceRequest: collector.ExportMetricsServiceRequest,
    ExportMetricsServiceResponse: collector.ExportMetricsServiceResponse,
    ExportTraceServiceRequest: tracesCollector.ExportTraceServiceRequest,
    ExportTraceServiceResponse: tracesCollector.ExportTraceServiceResponse,
};
