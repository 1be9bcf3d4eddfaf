#!/usr/bin/env node
'use strict';
// OTLP/HTTP metrics and traces receiver for xtel's integration tests. It decodes what an exporter
// pushes with OpenTelemetry JS's generated protobuf types (otlp_root.js), not with anything of
// xtel's, and records it in files that a C++ test reads with plain string operations.
//
// Usage: node tests/otlp/receiver.js --out DIR [--port N] [--fail N] [--retry-after S]
//                                    [--partial-success N]
// Once listening it prints one line, "listening on 127.0.0.1:PORT", and serves until SIGTERM or
// SIGINT, when it exits 0. It answers POST /v1/metrics and POST /v1/traces (other paths 404,
// other methods 405);
// Content-Type application/x-protobuf or application/json (else 415); Content-Encoding gzip or
// none (else 415); a body that does not decode, or JSON that breaks a rule of otlp_json.js, 400.
//
// Files in DIR (created empty at start; each record is appended, synchronously, before the answer
// goes out, and attempts.txt last, so its line for seq N means the others for N are there too).
// seq counts POSTs from 1, whatever their path and fate. Fields are separated by one tab.
//
// attempts.txt, one line per POST:
//   seq  status  content-type  content-encoding  body-bytes
//   (a header not sent is "-"; body-bytes counts the body as sent, before gunzip)
//
// errors.txt, one line per POST refused as the sender's fault (404, 413, 415, 400):
//   seq  status  reason
//   (the 503s of --fail are in attempts.txt only)
//
// requests.jsonl, one JSON object per line, per POST answered 200:
//   {"seq":N,"signal":"metrics"|"traces","encoding":"protobuf"|"json","gzip":BOOL,
//    "headers":{lowercased name: value},
//    "request":ExportMetricsServiceRequest or ExportTraceServiceRequest as protobufjs's toObject
//    gives it: lowerCamelCase keys, fields left at their default omitted, 64-bit integers as
//    decimal strings, enums as numbers, bytes as lowercase hex, NaN and infinities as "NaN",
//    "Infinity", "-Infinity"}
//
// spans.jsonl, one JSON object per line, per span of each POST to /v1/traces answered 200, in the
// request's order, its keys always present and in this order:
//   {"seq":N,"resource":{ATTRS},"scope":SCOPE,"traceId":HEX,"spanId":HEX,"parentSpanId":HEX,
//    "traceState":S,"flags":F,"name":S,"kind":K,"start":NANOS,"end":NANOS,
//    "status":{"code":C,"message":S} or null when not sent,"attributes":{ATTRS},
//    "events":[{"name":S,"time":NANOS,"attributes":{ATTRS}},...],"links":L}
//   HEX        lower-case hex ("" when not sent); F, K, C, L numbers (L counts the links);
//   NANOS      a string of decimal digits ("0" when not sent)
//   ATTRS      "key":"value" sorted by key, each value a string written as for points.txt below
//
// points.txt, one line per data point of each POST to /v1/metrics answered 200, in the request's
// order:
//   seq  KIND  NAME  unit=U  temporality=T  monotonic=M  resource=ATTRS  scope=SCOPE  attrs=ATTRS
//        start=NANOS  time=NANOS  then by KIND:
//     sum, gauge:             value=V  type=int|double|none  exemplars=EXEMPLARS
//     histogram:              count=C  sum=S  bounds=B1,B2,...  buckets=C1,C2,...
//                             exemplars=EXEMPLARS
//     exponential_histogram:  count=C  sum=S  scale=N  zero_count=C  positive=OFFSET:C1,C2,...
//                             negative=OFFSET:C1,C2,...  exemplars=EXEMPLARS
//     summary:                count=C  sum=S  quantiles=Q:V,Q:V,...
//   KIND       sum, gauge, histogram, exponential_histogram or summary
//   T          aggregationTemporality as a number (1 delta, 2 cumulative) for sum and both
//              histograms; 0 for gauge and summary
//   M          1 for a monotonic sum, else 0
//   ATTRS      k=v,k=v sorted by key: resource= the resource's attributes, attrs= the point's
//   SCOPE      the instrumentation scope's name
//   NANOS, C   decimal digits (0 when not sent); the buckets as sent, not cumulative
//   V, S, B, Q a double as JavaScript's String() prints it (1, 0.5, 1e+21, NaN), or for V an
//              asInt's decimal digits; S is empty when the point has no sum
//   EXEMPLARS  E;E;... each VALUE@TIME/trace=HEX/span=HEX/ATTRS (its filtered attributes; HEX
//              empty when not sent)
//   An attribute value is written as a string: ints as digits, doubles as String() prints them,
//   bools true/false, bytes as hex, arrays [v,v], key-value lists {k=v,k=v}, an empty value as
//   nothing. Backslash, tab, CR and LF are written \\ \t \r \n; ',' '=' ';' '/' '@' are not
//   escaped, so a test that parses a line should use keys and values without them.
//   A line leaves out what a test of xtel has not needed (description, scope version, flags, min,
//   max, zero threshold); requests.jsonl has the whole request.
const fs = require('fs');
const http = require('http');
const path = require('path');
const zlib = require('zlib');
const otlp = require('./otlp_root');
const { makeJsonDecoder, JsonRuleError } = require('./otlp_json');

const usage = `Usage: node receiver.js --out DIR [--port N] [--fail N] [--retry-after S]
                               [--partial-success N]
  --out DIR              record what arrives in DIR (created if missing; its five files emptied)
  --port N               listen on 127.0.0.1:N; 0, the default, takes any free port
  --fail N               answer the first N POSTs to /v1/metrics or /v1/traces with 503
  --retry-after S        add "Retry-After: S" to those 503s
  --partial-success N    answer each accepted request with partial_success rejecting N points
                         (N spans, for traces)`;

// The OTLP specification recommends this limit, before and after decompression.
const maxBodyBytes = 20 * 1024 * 1024;

// --- Options -------------------------------------------------------------------------------------

function usageError(message) {
    process.stderr.write(`receiver.js: ${message}\n${usage}\n`);
    process.exit(2);
}

function parseOptions(argv) {
    const options = { port: 0, out: null, fail: 0, retryAfter: null, partialSuccess: null };
    const integers = {
        '--port': ['port', 65535],
        '--fail': ['fail', Number.MAX_SAFE_INTEGER],
        '--retry-after': ['retryAfter', Number.MAX_SAFE_INTEGER],
        '--partial-success': ['partialSuccess', Number.MAX_SAFE_INTEGER],
    };
    for (let i = 0; i < argv.length; ++i) {
        const name = argv[i];
        if (name === '--help' || name === '-h') {
            process.stdout.write(usage + '\n');
            process.exit(0);
        }
        if (name !== '--out' && !(name in integers)) {
            const accepted = ['--out', ...Object.keys(integers), '--help'].join(', ');
            usageError(`unknown option "${name}"; accepted: ${accepted}`);
        }
        if (i + 1 >= argv.length) usageError(`${name} needs a value`);
        const value = argv[++i];
        if (name === '--out') {
            options.out = value;
            continue;
        }
        const [key, max] = integers[name];
        if (!/^[0-9]+$/.test(value) || Number(value) > max) {
            usageError(`${name}: expected an integer from 0 to ${max}, got "${value}"`);
        }
        options[key] = Number(value);
    }
    if (options.out === null) usageError('--out DIR is required');
    return options;
}

// --- Records -------------------------------------------------------------------------------------

const escapes = { '\\': '\\\\', '\t': '\\t', '\r': '\\r', '\n': '\\n' };

// Keeps one record on one line and its fields apart.
function escapeText(text) {
    return String(text).replace(/[\\\t\r\n]/g, (c) => escapes[c]);
}

// The decoded request of `signal` as a plain object (see requests.jsonl above).
function plainRequest(signal, message) {
    const options = { longs: String, enums: Number, json: true };
    const object = signal.Request.toObject(message, options);
    const hexify = (value) => {
        if (value instanceof Uint8Array) return Buffer.from(value).toString('hex');
        if (Array.isArray(value)) return value.map(hexify);
        if (value !== null && typeof value === 'object') {
            return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hexify(v)]));
        }
        return value;
    };
    return hexify(object);
}

function anyValueText(value) {
    if (!value) return '';
    if (value.stringValue !== undefined) return value.stringValue;
    if (value.boolValue !== undefined) return String(value.boolValue);
    if (value.intValue !== undefined) return value.intValue;
    if (value.doubleValue !== undefined) return String(value.doubleValue);
    if (value.bytesValue !== undefined) return value.bytesValue;
    if (value.arrayValue !== undefined) {
        return `[${(value.arrayValue.values || []).map(anyValueText).join(',')}]`;
    }
    if (value.kvlistValue !== undefined) return `{${attributesText(value.kvlistValue.values)}}`;
    return '';
}

function attributesText(attributes) {
    return (attributes || [])
        .map((kv) => [kv.key || '', anyValueText(kv.value)])
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => `${k}=${v}`)
        .join(',');
}

function numberText(point) {
    if (point.asInt !== undefined) return { value: point.asInt, type: 'int' };
    if (point.asDouble !== undefined) return { value: String(point.asDouble), type: 'double' };
    return { value: '', type: 'none' };
}

function exemplarsText(exemplars) {
    return (exemplars || [])
        .map((e) => {
            const ids = `trace=${e.traceId || ''}/span=${e.spanId || ''}`;
            const time = e.timeUnixNano || '0';
            return `${numberText(e).value}@${time}/${ids}/${attributesText(e.filteredAttributes)}`;
        })
        .join(';');
}

function sumText(point) {
    return point.sum === undefined ? '' : String(point.sum);
}

function bucketsText(buckets) {
    return buckets ? `${buckets.offset || 0}:${(buckets.bucketCounts || []).join(',')}` : '0:';
}

// Each kind: where its points are, and the fields its lines end with.
const pointKinds = {
    sum: {
        key: 'sum',
        fields: (p) => {
            const n = numberText(p);
            return [
                `value=${n.value}`,
                `type=${n.type}`,
                `exemplars=${exemplarsText(p.exemplars)}`,
            ];
        },
    },
    gauge: { key: 'gauge', fields: (p) => pointKinds.sum.fields(p) },
    histogram: {
        key: 'histogram',
        fields: (p) => [
            `count=${p.count || '0'}`,
            `sum=${sumText(p)}`,
            `bounds=${(p.explicitBounds || []).map(String).join(',')}`,
            `buckets=${(p.bucketCounts || []).join(',')}`,
            `exemplars=${exemplarsText(p.exemplars)}`,
        ],
    },
    exponential_histogram: {
        key: 'exponentialHistogram',
        fields: (p) => [
            `count=${p.count || '0'}`,
            `sum=${sumText(p)}`,
            `scale=${p.scale || 0}`,
            `zero_count=${p.zeroCount || '0'}`,
            `positive=${bucketsText(p.positive)}`,
            `negative=${bucketsText(p.negative)}`,
            `exemplars=${exemplarsText(p.exemplars)}`,
        ],
    },
    summary: {
        key: 'summary',
        fields: (p) => [
            `count=${p.count || '0'}`,
            `sum=${sumText(p)}`,
            `quantiles=${(p.quantileValues || [])
                .map((q) => `${q.quantile || 0}:${q.value || 0}`)
                .join(',')}`,
        ],
    },
};

// The points.txt lines of one request (see the format above).
function pointLines(seq, request) {
    const lines = [];
    for (const rm of request.resourceMetrics || []) {
        const resource = attributesText(rm.resource && rm.resource.attributes);
        for (const sm of rm.scopeMetrics || []) {
            const scope = (sm.scope && sm.scope.name) || '';
            for (const metric of sm.metrics || []) {
                for (const [kind, { key, fields }] of Object.entries(pointKinds)) {
                    const data = metric[key];
                    if (!data) continue;
                    // Gauges and summaries have neither field.
                    const temporality = data.aggregationTemporality || 0;
                    const monotonic = data.isMonotonic ? 1 : 0;
                    for (const p of data.dataPoints || []) {
                        const line = [
                            seq,
                            kind,
                            metric.name || '',
                            `unit=${metric.unit || ''}`,
                            `temporality=${temporality}`,
                            `monotonic=${monotonic}`,
                            `resource=${resource}`,
                            `scope=${scope}`,
                            `attrs=${attributesText(p.attributes)}`,
                            `start=${p.startTimeUnixNano || '0'}`,
                            `time=${p.timeUnixNano || '0'}`,
                            ...fields(p),
                        ];
                        lines.push(line.map(escapeText).join('\t'));
                    }
                }
            }
        }
    }
    return lines;
}

// ATTRS of spans.jsonl: the attributes as one object, sorted by key.
function attributesObject(attributes) {
    return Object.fromEntries(
        (attributes || [])
            .map((kv) => [kv.key || '', anyValueText(kv.value)])
            .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    );
}

// The spans.jsonl lines of one request (see the format above).
function spanLines(seq, request) {
    const lines = [];
    for (const rs of request.resourceSpans || []) {
        const resource = attributesObject(rs.resource && rs.resource.attributes);
        for (const ss of rs.scopeSpans || []) {
            const scope = (ss.scope && ss.scope.name) || '';
            for (const s of ss.spans || []) {
                const status = s.status
                    ? { code: s.status.code || 0, message: s.status.message || '' }
                    : null;
                const events = (s.events || []).map((e) => ({
                    name: e.name || '',
                    time: e.timeUnixNano || '0',
                    attributes: attributesObject(e.attributes),
                }));
                // toObject wrote the ids as hex already (plainRequest); lower-case, as Buffer
                // writes it.
                const span = {
                    seq,
                    resource,
                    scope,
                    traceId: s.traceId || '',
                    spanId: s.spanId || '',
                    parentSpanId: s.parentSpanId || '',
                    traceState: s.traceState || '',
                    flags: s.flags || 0,
                    name: s.name || '',
                    kind: s.kind || 0,
                    start: s.startTimeUnixNano || '0',
                    end: s.endTimeUnixNano || '0',
                    status,
                    attributes: attributesObject(s.attributes),
                    events,
                    links: (s.links || []).length,
                };
                lines.push(JSON.stringify(span));
            }
        }
    }
    return lines;
}

function makeRecorder(dir) {
    fs.mkdirSync(dir, { recursive: true });
    const file = (name) => path.join(dir, name);
    const names = ['attempts.txt', 'errors.txt', 'requests.jsonl', 'points.txt', 'spans.jsonl'];
    for (const name of names) {
        fs.writeFileSync(file(name), '');
    }
    const append = (name, lines) => {
        if (lines.length) fs.appendFileSync(file(name), lines.map((l) => l + '\n').join(''));
    };
    const line = (...fields) => fields.map(escapeText).join('\t');
    return {
        accepted(seq, signal, encoding, gzip, headers, message) {
            const request = plainRequest(signal, message);
            const record = { seq, signal: signal.name, encoding, gzip, headers, request };
            append('requests.jsonl', [JSON.stringify(record)]);
            append(signal.file, signal.lines(seq, request));
        },
        error(seq, status, reason) {
            append('errors.txt', [line(seq, status, reason)]);
        },
        attempt(seq, status, headers, bodyBytes) {
            const type = headers['content-type'] || '-';
            const encoding = headers['content-encoding'] || '-';
            append('attempts.txt', [line(seq, status, type, encoding, bodyBytes)]);
        },
    };
}

// --- Requests ------------------------------------------------------------------------------------

const encodings = {
    'application/x-protobuf': 'protobuf',
    'application/json': 'json',
};
const utf8 = new TextDecoder('utf-8', { fatal: true });

// What differs between the two signals, by path.
const signals = {
    '/v1/metrics': {
        name: 'metrics',
        Request: otlp.ExportMetricsServiceRequest,
        Response: otlp.ExportMetricsServiceResponse,
        typeName: 'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest',
        root: otlp.root,
        rejectedKey: 'rejectedDataPoints',
        rejectedWhat: 'points',
        file: 'points.txt',
        lines: pointLines,
    },
    '/v1/traces': {
        name: 'traces',
        Request: otlp.ExportTraceServiceRequest,
        Response: otlp.ExportTraceServiceResponse,
        typeName: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
        root: otlp.tracesRoot,
        rejectedKey: 'rejectedSpans',
        rejectedWhat: 'spans',
        file: 'spans.jsonl',
        lines: spanLines,
    },
};

// The response body for an accepted request of `signal`, in the request's encoding.
function successBody(signal, encoding, rejected) {
    const Response = signal.Response;
    const partialSuccess = {
        [signal.rejectedKey]: String(rejected),
        errorMessage: `test rejects ${rejected} ${signal.rejectedWhat}`,
    };
    const response = Response.fromObject(rejected === null ? {} : { partialSuccess });
    if (encoding === 'protobuf') return Buffer.from(Response.encode(response).finish());
    const object = Response.toObject(response, { longs: String, enums: Number, json: true });
    return Buffer.from(JSON.stringify(object));
}

function textAnswer(status, message, headers = {}) {
    return {
        status,
        headers: { 'content-type': 'text/plain', ...headers },
        body: Buffer.from(message),
    };
}

// The same, for a request refused as the sender's fault: errors.txt gets the reason.
function refusal(status, reason) {
    return { ...textAnswer(status, reason), error: reason };
}

// The request's message, decoded from a body in either encoding, or a refusal.
function decodeBody(signal, encoding, payload, state) {
    try {
        if (encoding === 'protobuf') {
            return { message: signal.Request.decode(payload) };
        }
        let text;
        try {
            text = utf8.decode(payload);
        } catch (e) {
            throw new JsonRuleError('the body is not UTF-8');
        }
        return { message: state.decodeJson[signal.name](text) };
    } catch (e) {
        const what = e instanceof JsonRuleError ? 'OTLP JSON rule' : `${encoding} decode`;
        return { refused: refusal(400, `${what}: ${e.message}`) };
    }
}

// The answer to one POST to `signal`'s path, whose whole body has arrived:
// { status, headers, body, error? (the reason for errors.txt), accepted? (what to record) }.
function judge(signal, headers, body, state) {
    if (state.failuresLeft > 0) {
        --state.failuresLeft;
        const after = state.options.retryAfter;
        const retry = after === null ? {} : { 'retry-after': String(after) };
        return textAnswer(503, 'unavailable', retry);
    }
    const mediaType = (headers['content-type'] || '').split(';')[0].trim().toLowerCase();
    const encoding = encodings[mediaType];
    if (!encoding) {
        const accepted = Object.keys(encodings).join(', ');
        return refusal(415, `unsupported content type "${mediaType}"; accepted: ${accepted}`);
    }
    const contentEncoding = (headers['content-encoding'] || 'identity').trim().toLowerCase();
    if (contentEncoding !== 'gzip' && contentEncoding !== 'identity') {
        const named = `unsupported content encoding "${contentEncoding}"`;
        return refusal(415, `${named}; accepted: gzip, identity`);
    }
    const gzip = contentEncoding === 'gzip';
    let payload = body;
    if (gzip) {
        try {
            payload = zlib.gunzipSync(body, { maxOutputLength: maxBodyBytes });
        } catch (e) {
            if (e.code !== 'ERR_BUFFER_TOO_LARGE') return refusal(400, `gunzip: ${e.message}`);
            return refusal(413, `body is over ${maxBodyBytes} bytes after gunzip`);
        }
    }
    const { message, refused } = decodeBody(signal, encoding, payload, state);
    if (refused) return refused;
    return {
        status: 200,
        headers: { 'content-type': mediaType },
        body: successBody(signal, encoding, state.options.partialSuccess),
        accepted: { encoding, gzip, message },
    };
}

function send(res, answer) {
    const headers = { ...answer.headers, 'content-length': answer.body.length };
    res.writeHead(answer.status, headers).end(answer.body);
}

function handle(req, res, state) {
    const pathname = new URL(req.url, 'http://receiver').pathname;
    const signal = Object.hasOwn(signals, pathname) ? signals[pathname] : null;
    if (req.method !== 'POST') {
        req.resume();
        if (!signal) return send(res, textAnswer(404, 'not found'));
        return send(res, textAnswer(405, 'only POST', { allow: 'POST' }));
    }
    const seq = ++state.seq;
    const chunks = [];
    let bytes = 0;
    req.on('data', (chunk) => {
        bytes += chunk.length;
        if (bytes <= maxBodyBytes) chunks.push(chunk);
    });
    req.on('end', () => {
        let answer;
        if (!signal) {
            const served = Object.keys(signals).join(' and ');
            answer = refusal(404, `POST to ${pathname}; only ${served} are served`);
        } else if (bytes > maxBodyBytes) {
            answer = refusal(413, `body is over ${maxBodyBytes} bytes`);
        } else {
            answer = judge(signal, req.headers, Buffer.concat(chunks), state);
        }
        if (answer.accepted) {
            const { encoding, gzip, message } = answer.accepted;
            state.recorder.accepted(seq, signal, encoding, gzip, req.headers, message);
        }
        if (answer.error) state.recorder.error(seq, answer.status, answer.error);
        state.recorder.attempt(seq, answer.status, req.headers, bytes);
        send(res, answer);
    });
}

function main() {
    const options = parseOptions(process.argv.slice(2));
    const decodeJson = {};
    for (const signal of Object.values(signals)) {
        decodeJson[signal.name] = makeJsonDecoder(signal.root, signal.Request, signal.typeName);
    }
    const state = {
        options,
        seq: 0,
        failuresLeft: options.fail,
        recorder: makeRecorder(options.out),
        decodeJson,
    };
    const server = http.createServer((req, res) => handle(req, res, state));
    // Every record is written synchronously before its answer, so nothing is lost by exiting at
    // once, and a connection kept alive by the exporter cannot hold the exit up.
    for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
    server.on('error', (e) => {
        const where = `127.0.0.1:${options.port}`;
        process.stderr.write(`receiver.js: cannot listen on ${where}: ${e.message}\n`);
        process.exit(1);
    });
    server.listen(options.port, '127.0.0.1', () => {
        // Node writes to a pipe or a file synchronously on Linux: the line is out on return.
        process.stdout.write(`listening on 127.0.0.1:${server.address().port}\n`);
    });
}

main();
