'use strict';
// Checks receiver.js without any C++: node tests/otlp/selftest.js (exit status 0 when all pass).
// Each test starts its own receiver, so seq numbers start at 1 in every one. Requests are built
// with the same generated types the receiver decodes with, and the JSON ones are written by hand
// in the OTLP JSON form, so a JSON test checks the receiver's rules, not a second encoder.
const assert = require('assert/strict');
const childProcess = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const test = require('node:test');
const zlib = require('zlib');
const otlp = require('./otlp_root');

const receiverPath = path.join(__dirname, 'receiver.js');
const Request = otlp.ExportMetricsServiceRequest;
const Response = otlp.ExportMetricsServiceResponse;

// --- Helpers -------------------------------------------------------------------------------------

// The first line a child writes to stdout.
function firstLine(child, exited) {
    return new Promise((resolve, reject) => {
        let text = '';
        child.stdout.on('data', (chunk) => {
            text += chunk;
            if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
        });
        exited.then(({ code }) => reject(new Error(`receiver exited ${code} before listening`)));
    });
}

// A receiver on a free port, recording into a fresh folder that goes when the test ends;
// stop() sends SIGTERM and gives { code, signal } of the exit.
async function startReceiver(t, ...args) {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'otlp-selftest-'));
    const child = childProcess.spawn(
        process.execPath,
        [receiverPath, '--port', '0', '--out', out, ...args],
        { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const exited = new Promise((resolve) => {
        child.on('exit', (code, signal) => resolve({ code, signal }));
    });
    const line = await firstLine(child, exited);
    const match = /^listening on 127\.0\.0\.1:([0-9]+)$/.exec(line);
    assert.ok(match, `first line: ${JSON.stringify(line)}`);
    const stop = () => {
        if (child.exitCode === null) child.kill('SIGTERM');
        return exited;
    };
    t.after(async () => {
        await stop();
        fs.rmSync(out, { recursive: true, force: true });
    });
    const read = (name) => fs.readFileSync(path.join(out, name), 'utf8');
    const lines = (name) => read(name).split('\n').filter(Boolean);
    return { port: Number(match[1]), stop, read, lines };
}

// One request on its own connection: { status, headers, body }.
function post(port, { path: urlPath = '/v1/metrics', method = 'POST', headers = {}, body = '' }) {
    const options = { host: '127.0.0.1', port, path: urlPath, method, headers, agent: false };
    return new Promise((resolve, reject) => {
        const req = http.request(options, (res) => {
            const chunks = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => {
                const body = Buffer.concat(chunks);
                resolve({ status: res.statusCode, headers: res.headers, body });
            });
        });
        req.on('error', reject);
        req.end(body);
    });
}

const protobufHeaders = { 'content-type': 'application/x-protobuf' };
const gzipHeaders = { ...protobufHeaders, 'content-encoding': 'gzip' };
const jsonHeaders = { 'content-type': 'application/json' };

const encode = (object) => Buffer.from(Request.encode(Request.fromObject(object)).finish());
const firstFields = (lines, n) => lines.map((line) => line.split('\t').slice(0, n).join(' '));

// --- The request every encoding carries ----------------------------------------------------------

const traceHex = '0af7651916cd43dd8448eb211c80319c';
const spanHex = 'b7ad6b7169203331';
const start = '1700000000000000000';
const time = '1700000001000000000';

const text = (key, stringValue) => ({ key, value: { stringValue } });
const int = (key, intValue) => ({ key, value: { intValue } });

// One sum at the largest sfixed64, one gauge, one histogram whose count is the largest fixed64
// (both past 2^53, where a double would lose digits) with an exemplar.
const sampleMetrics = [
    {
        name: 'requests_total',
        unit: '1',
        sum: {
            aggregationTemporality: 2,
            isMonotonic: true,
            dataPoints: [{
                attributes: [text('route', 'a'), int('code', '200')],
                startTimeUnixNano: start,
                timeUnixNano: time,
                asInt: '9223372036854775807',
            }],
        },
    },
    {
        name: 'temperature',
        unit: 'Cel',
        gauge: {
            dataPoints: [{ attributes: [text('room', 'lab')], timeUnixNano: time, asDouble: 21.5 }],
        },
    },
    {
        name: 'latency_seconds',
        unit: 's',
        histogram: {
            aggregationTemporality: 1,
            dataPoints: [{
                attributes: [text('method', 'get')],
                startTimeUnixNano: start,
                timeUnixNano: time,
                count: '18446744073709551615',
                sum: 12.75,
                explicitBounds: [0.1, 1, 10],
                bucketCounts: ['1', '2', '0', '3'],
                exemplars: [{
                    asDouble: 0.5,
                    timeUnixNano: '1700000000500000000',
                    traceId: Buffer.from(traceHex, 'hex'),
                    spanId: Buffer.from(spanHex, 'hex'),
                    filteredAttributes: [text('user', 'u1')],
                }],
            }],
        },
    },
];

function requestOf(metrics) {
    return {
        resourceMetrics: [{
            resource: { attributes: [text('service.name', 'selftest'), int('host.id', '7')] },
            scopeMetrics: [{ scope: { name: 'xtel', version: '1.0' }, metrics }],
        }],
    };
}

const sampleProtobuf = encode(requestOf(sampleMetrics));

// The same request, by hand, in OTLP JSON. The trace id is in capitals: the specification makes
// hex case-insensitive, and the receiver records it in lowercase.
const sampleJson = `{
  "resourceMetrics": [{
    "resource": {"attributes": [
      {"key": "service.name", "value": {"stringValue": "selftest"}},
      {"key": "host.id", "value": {"intValue": "7"}}]},
    "scopeMetrics": [{
      "scope": {"name": "xtel", "version": "1.0"},
      "metrics": [
        {"name": "requests_total", "unit": "1",
         "sum": {"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": [{
           "attributes": [{"key": "route", "value": {"stringValue": "a"}},
                          {"key": "code", "value": {"intValue": "200"}}],
           "startTimeUnixNano": "${start}", "timeUnixNano": "${time}",
           "asInt": "9223372036854775807"}]}},
        {"name": "temperature", "unit": "Cel",
         "gauge": {"dataPoints": [{
           "attributes": [{"key": "room", "value": {"stringValue": "lab"}}],
           "timeUnixNano": "${time}", "asDouble": 21.5}]}},
        {"name": "latency_seconds", "unit": "s",
         "histogram": {"aggregationTemporality": 1, "dataPoints": [{
           "attributes": [{"key": "method", "value": {"stringValue": "get"}}],
           "startTimeUnixNano": "${start}", "timeUnixNano": "${time}",
           "count": "18446744073709551615", "sum": 12.75,
           "explicitBounds": [0.1, 1, 10], "bucketCounts": ["1", "2", "0", "3"],
           "exemplars": [{"asDouble": 0.5, "timeUnixNano": "1700000000500000000",
                          "traceId": "${traceHex.toUpperCase()}", "spanId": "${spanHex}",
                          "filteredAttributes": [{"key": "user", "value": {"stringValue": "u1"}}]
                        }]}]}}
      ]}]}]}`;

// The points.txt lines of one kind and name, in the sample's resource and scope.
const pointLine = (seq, kind, name, rest) =>
    [seq, kind, name, ...rest.slice(0, 3), 'resource=host.id=7,service.name=selftest', 'scope=xtel',
        ...rest.slice(3)].join('\t');

const samplePoints = (seq) => [
    pointLine(seq, 'sum', 'requests_total', [
        'unit=1', 'temporality=2', 'monotonic=1', 'attrs=code=200,route=a', `start=${start}`,
        `time=${time}`, 'value=9223372036854775807', 'type=int', 'exemplars=',
    ]),
    pointLine(seq, 'gauge', 'temperature', [
        'unit=Cel', 'temporality=0', 'monotonic=0', 'attrs=room=lab', 'start=0', `time=${time}`,
        'value=21.5', 'type=double', 'exemplars=',
    ]),
    pointLine(seq, 'histogram', 'latency_seconds', [
        'unit=s', 'temporality=1', 'monotonic=0', 'attrs=method=get', `start=${start}`,
        `time=${time}`, 'count=18446744073709551615', 'sum=12.75', 'bounds=0.1,1,10',
        'buckets=1,2,0,3',
        `exemplars=0.5@1700000000500000000/trace=${traceHex}/span=${spanHex}/user=u1`,
    ]),
];

// What every test of an accepted sample checks: the answer, points.txt, requests.jsonl.
function checkAccepted(receiver, response, encoding, gzip) {
    const type = encoding === 'json' ? 'application/json' : 'application/x-protobuf';
    assert.equal(response.status, 200, response.body.toString());
    assert.equal(response.headers['content-type'], type);
    if (encoding === 'json') assert.equal(response.body.toString(), '{}');
    else assert.deepEqual(Response.decode(response.body).toJSON(), {});
    assert.deepEqual(receiver.lines('points.txt'), samplePoints(1));
    const records = receiver.lines('requests.jsonl').map((line) => JSON.parse(line));
    assert.equal(records.length, 1);
    const [record] = records;
    assert.equal(record.seq, 1);
    assert.equal(record.signal, 'metrics');
    assert.equal(record.encoding, encoding);
    assert.equal(record.gzip, gzip);
    assert.equal(record.headers['content-type'], type);
    const metrics = record.request.resourceMetrics[0].scopeMetrics[0].metrics;
    assert.equal(metrics[0].sum.dataPoints[0].asInt, '9223372036854775807');
    const histogramPoint = metrics[2].histogram.dataPoints[0];
    assert.equal(histogramPoint.count, '18446744073709551615');
    assert.equal(histogramPoint.exemplars[0].traceId, traceHex);
    assert.equal(receiver.read('errors.txt'), '');
    assert.equal(receiver.read('spans.jsonl'), '');
}

// --- Accepted requests ---------------------------------------------------------------------------

test('a protobuf request is recorded as exact points lines', async (t) => {
    const receiver = await startReceiver(t);
    const response = await post(receiver.port, { headers: protobufHeaders, body: sampleProtobuf });
    checkAccepted(receiver, response, 'protobuf', false);
    const attempt = `1\t200\tapplication/x-protobuf\t-\t${sampleProtobuf.length}`;
    assert.deepEqual(receiver.lines('attempts.txt'), [attempt]);
});

test('a gzipped protobuf request is recorded as the same points lines', async (t) => {
    const receiver = await startReceiver(t);
    const body = zlib.gzipSync(sampleProtobuf);
    const response = await post(receiver.port, { headers: gzipHeaders, body });
    checkAccepted(receiver, response, 'protobuf', true);
    const attempt = `1\t200\tapplication/x-protobuf\tgzip\t${body.length}`;
    assert.deepEqual(receiver.lines('attempts.txt'), [attempt]);
});

test('a hand-written OTLP JSON request is recorded as the same points lines', async (t) => {
    const receiver = await startReceiver(t);
    const response = await post(receiver.port, { headers: jsonHeaders, body: sampleJson });
    checkAccepted(receiver, response, 'json', false);
});

test('JSON and protobuf of one request are recorded as the same plain object', async (t) => {
    const receiver = await startReceiver(t);
    const sent = [
        await post(receiver.port, { headers: protobufHeaders, body: sampleProtobuf }),
        await post(receiver.port, { headers: jsonHeaders, body: sampleJson }),
    ];
    assert.deepEqual(sent.map((response) => response.status), [200, 200]);
    const records = receiver.lines('requests.jsonl').map((line) => JSON.parse(line).request);
    assert.deepEqual(records[1], records[0]);
});

test('exponential histograms, summaries and awkward attribute values have their line forms',
    async (t) => {
        const receiver = await startReceiver(t);
        const list = [{ boolValue: true }, { doubleValue: 1e21 }];
        const body = encode(requestOf([
            {
                name: 'sizes',
                exponentialHistogram: {
                    aggregationTemporality: 2,
                    dataPoints: [{
                        attributes: [text('tab', 'a\tb\nc\\d'), { key: 'empty', value: {} }],
                        timeUnixNano: time,
                        count: '5',
                        scale: -2,
                        zeroCount: '1',
                        positive: { offset: 3, bucketCounts: ['2', '1'] },
                        exemplars: [{ asInt: '-4', timeUnixNano: time }],
                    }],
                },
            },
            {
                name: 'rtt',
                summary: {
                    dataPoints: [{
                        attributes: [{ key: 'list', value: { arrayValue: { values: list } } }],
                        timeUnixNano: time,
                        count: '2',
                        sum: 3,
                        quantileValues: [{ quantile: 0.5, value: 1 }, { quantile: 1, value: 2 }],
                    }],
                },
            },
        ]));
        const response = await post(receiver.port, { headers: protobufHeaders, body });
        assert.equal(response.status, 200);
        assert.deepEqual(receiver.lines('points.txt'), [
            pointLine(1, 'exponential_histogram', 'sizes', [
                'unit=', 'temporality=2', 'monotonic=0', 'attrs=empty=,tab=a\\tb\\nc\\\\d',
                'start=0', `time=${time}`, 'count=5', 'sum=', 'scale=-2', 'zero_count=1',
                'positive=3:2,1', 'negative=0:', `exemplars=-4@${time}/trace=/span=/`,
            ]),
            pointLine(1, 'summary', 'rtt', [
                'unit=', 'temporality=0', 'monotonic=0', 'attrs=list=[true,1e+21]', 'start=0',
                `time=${time}`, 'count=2', 'sum=3', 'quantiles=0.5:1,1:2',
            ]),
        ]);
    });

// --- Traces ------------------------------------------------------------------------------------

const TraceRequest = otlp.ExportTraceServiceRequest;
const TraceResponse = otlp.ExportTraceServiceResponse;
const childHex = '00f067aa0ba902b7';
const end = '1700000000000250000';

// Two spans: a child of a remote parent with an error status, an event and 64-bit attributes,
// and a root span with nothing but its ids and name.
const sampleTraceProtobuf = Buffer.from(TraceRequest.encode(TraceRequest.fromObject({
    resourceSpans: [{
        resource: { attributes: [text('xtel.agent.name', 'prefill-0'), int('host.id', '7')] },
        scopeSpans: [{
            scope: { name: 'xtel', version: '1.0' },
            spans: [
                {
                    traceId: Buffer.from(traceHex, 'hex'),
                    spanId: Buffer.from(childHex, 'hex'),
                    parentSpanId: Buffer.from(spanHex, 'hex'),
                    flags: 0x301,
                    name: 'write decode-0',
                    kind: 3,
                    startTimeUnixNano: start,
                    endTimeUnixNano: end,
                    attributes: [int('xtel.bytes', '9223372036854775807'), text('peer', 'd0')],
                    events: [{ name: 'posted', timeUnixNano: start, attributes: [int('n', '2')] }],
                    status: { code: 2, message: 'timeout' },
                },
                {
                    traceId: Buffer.from(traceHex, 'hex'),
                    spanId: Buffer.from(spanHex, 'hex'),
                    name: 'root',
                },
            ],
        }],
    }],
})).finish());

// The same request, by hand, in OTLP JSON; the ids in capitals (hex is case-insensitive).
const sampleTraceJson = `{"resourceSpans": [{
  "resource": {"attributes": [
    {"key": "xtel.agent.name", "value": {"stringValue": "prefill-0"}},
    {"key": "host.id", "value": {"intValue": "7"}}]},
  "scopeSpans": [{"scope": {"name": "xtel", "version": "1.0"}, "spans": [
    {"traceId": "${traceHex.toUpperCase()}", "spanId": "${childHex.toUpperCase()}",
     "parentSpanId": "${spanHex.toUpperCase()}", "flags": 769, "name": "write decode-0",
     "kind": 3, "startTimeUnixNano": "${start}", "endTimeUnixNano": "${end}",
     "attributes": [{"key": "xtel.bytes", "value": {"intValue": "9223372036854775807"}},
                    {"key": "peer", "value": {"stringValue": "d0"}}],
     "events": [{"name": "posted", "timeUnixNano": "${start}",
                 "attributes": [{"key": "n", "value": {"intValue": "2"}}]}],
     "status": {"code": 2, "message": "timeout"}},
    {"traceId": "${traceHex}", "spanId": "${spanHex}", "parentSpanId": "", "name": "root"}
  ]}]}]}`;

const sampleSpans = (seq) => [
    {
        seq,
        resource: { 'host.id': '7', 'xtel.agent.name': 'prefill-0' },
        scope: 'xtel',
        traceId: traceHex,
        spanId: childHex,
        parentSpanId: spanHex,
        traceState: '',
        flags: 0x301,
        name: 'write decode-0',
        kind: 3,
        start,
        end,
        status: { code: 2, message: 'timeout' },
        attributes: { peer: 'd0', 'xtel.bytes': '9223372036854775807' },
        events: [{ name: 'posted', time: start, attributes: { n: '2' } }],
        links: 0,
    },
    {
        seq,
        resource: { 'host.id': '7', 'xtel.agent.name': 'prefill-0' },
        scope: 'xtel',
        traceId: traceHex,
        spanId: spanHex,
        parentSpanId: '',
        traceState: '',
        flags: 0,
        name: 'root',
        kind: 0,
        start: '0',
        end: '0',
        status: null,
        attributes: {},
        events: [],
        links: 0,
    },
];

const postTraces = (port, headers, body) => post(port, { path: '/v1/traces', headers, body });

test('a protobuf traces request is recorded as one exact spans.jsonl line per span', async (t) => {
    const receiver = await startReceiver(t);
    const response = await postTraces(receiver.port, protobufHeaders, sampleTraceProtobuf);
    assert.equal(response.status, 200, response.body.toString());
    assert.equal(response.headers['content-type'], 'application/x-protobuf');
    assert.deepEqual(TraceResponse.decode(response.body).toJSON(), {});
    const lines = receiver.lines('spans.jsonl');
    assert.deepEqual(lines.map((line) => JSON.parse(line)), sampleSpans(1));
    // The keys in the documented order, so a test may look for "spanId":"…","parentSpanId":"…".
    assert.ok(lines[0].startsWith('{"seq":1,"resource":{"host.id":"7","xtel.agent.name"'));
    assert.ok(lines[0].includes(`"traceId":"${traceHex}","spanId":"${childHex}"`), lines[0]);
    const [record] = receiver.lines('requests.jsonl').map((line) => JSON.parse(line));
    assert.equal(record.signal, 'traces');
    assert.equal(record.request.resourceSpans[0].scopeSpans[0].spans[0].parentSpanId, spanHex);
    assert.equal(receiver.read('points.txt'), '');
    assert.equal(receiver.read('errors.txt'), '');
    const attempt = `1\t200\tapplication/x-protobuf\t-\t${sampleTraceProtobuf.length}`;
    assert.deepEqual(receiver.lines('attempts.txt'), [attempt]);
});

test('a hand-written OTLP JSON traces request is recorded as the same spans lines', async (t) => {
    const receiver = await startReceiver(t);
    const response = await postTraces(receiver.port, jsonHeaders, sampleTraceJson);
    assert.equal(response.status, 200, response.body.toString());
    assert.equal(response.body.toString(), '{}');
    const spans = receiver.lines('spans.jsonl').map((line) => JSON.parse(line));
    assert.deepEqual(spans, sampleSpans(1));
});

test('a parent span id in base64 instead of hex is refused', async (t) => {
    const receiver = await startReceiver(t);
    const base64 = Buffer.from(spanHex, 'hex').toString('base64');
    const body = sampleTraceJson.replace(`"${spanHex.toUpperCase()}"`, `"${base64}"`);
    assert.notEqual(body, sampleTraceJson);
    const response = await postTraces(receiver.port, jsonHeaders, body);
    assert.equal(response.status, 400);
    const errors = receiver.lines('errors.txt');
    assert.equal(errors.length, 1);
    assert.match(errors[0], /spans\[0\]\.parentSpanId: expected 8 bytes as 16 hex digits/);
    assert.equal(receiver.read('spans.jsonl'), '');
});

test('--fail and --partial-success apply to traces: 503 first, then rejectedSpans',
    async (t) => {
        const receiver = await startReceiver(t, '--fail', '1', '--partial-success', '2');
        const failed = await postTraces(receiver.port, protobufHeaders, sampleTraceProtobuf);
        assert.equal(failed.status, 503);
        const binary = await postTraces(receiver.port, protobufHeaders, sampleTraceProtobuf);
        assert.equal(binary.status, 200);
        const partialSuccess = { rejectedSpans: '2', errorMessage: 'test rejects 2 spans' };
        assert.deepEqual(TraceResponse.decode(binary.body).toJSON(), { partialSuccess });
        const json = await postTraces(receiver.port, jsonHeaders, sampleTraceJson);
        assert.deepEqual(JSON.parse(json.body.toString()), { partialSuccess });
        const attempts = firstFields(receiver.lines('attempts.txt'), 2);
        assert.deepEqual(attempts, ['1 503', '2 200', '3 200']);
        const seqs = receiver.lines('spans.jsonl').map((line) => JSON.parse(line).seq);
        assert.deepEqual(seqs, [2, 2, 3, 3]);
    });

// --- Refused requests ----------------------------------------------------------------------------

// Sends the sample JSON with one edit and expects a 400 whose reason matches `expected`, in the
// answer and in errors.txt, and no record of the request anywhere else.
async function expectJsonRefused(t, [from, to], expected) {
    const receiver = await startReceiver(t);
    const body = sampleJson.replace(from, to);
    assert.notEqual(body, sampleJson, `the sample has no ${from}`);
    const response = await post(receiver.port, { headers: jsonHeaders, body });
    assert.equal(response.status, 400);
    assert.match(response.body.toString(), expected);
    const errors = receiver.lines('errors.txt');
    assert.equal(errors.length, 1);
    assert.match(errors[0], /^1\t400\tOTLP JSON rule: /);
    assert.match(errors[0], expected);
    assert.equal(receiver.read('points.txt'), '');
    assert.equal(receiver.read('requests.jsonl'), '');
    const attempt = `1\t400\tapplication/json\t-\t${Buffer.byteLength(body)}`;
    assert.deepEqual(receiver.lines('attempts.txt'), [attempt]);
}

test('a JSON key that is no field of its message is refused', (t) =>
    expectJsonRefused(t, ['"unit": "Cel"', '"unit": "Cel", "unitt": "x"'],
        /resourceMetrics\[0\]\.scopeMetrics\[0\]\.metrics\[1\]\.unitt: unknown field "unitt"/));

test('a JSON key in snake_case is refused with its lowerCamelCase name', (t) =>
    expectJsonRefused(t, ['"isMonotonic"', '"is_monotonic"'],
        /keys are lowerCamelCase: "isMonotonic"/));

test('a 64-bit integer written as a JSON number is refused', (t) =>
    expectJsonRefused(t, ['"count": "18446744073709551615"', '"count": 6'],
        /dataPoints\[0\]\.count: a 64-bit integer is a JSON string of decimal digits, got 6/));

test('a 64-bit string out of its type\'s range is refused', (t) =>
    expectJsonRefused(t, ['"asInt": "9223372036854775807"', '"asInt": "9223372036854775808"'],
        /out of range for int64/));

test('an enum written as its name is refused', (t) =>
    expectJsonRefused(t, ['"aggregationTemporality": 2', '"aggregationTemporality": "CUMULATIVE"'],
        /sum\.aggregationTemporality: an enum is a JSON number/));

test('a trace id in base64 instead of hex is refused', (t) =>
    expectJsonRefused(t, [traceHex.toUpperCase(), Buffer.from(traceHex, 'hex').toString('base64')],
        /traceId: expected 16 bytes as 32 hex digits/));

test('both members of a oneof are refused', (t) =>
    expectJsonRefused(t, ['"asDouble": 21.5', '"asDouble": 21.5, "asInt": "21"'],
        /asDouble and asInt are one oneof/));

test('wrong path, method, content type, encoding and undecodable bodies get 404, 405, 415, 400',
    async (t) => {
        const receiver = await startReceiver(t);
        const cases = [
            [{ path: '/v1/logs', headers: protobufHeaders, body: sampleProtobuf }, 404],
            [{ headers: { 'content-type': 'text/plain' }, body: sampleProtobuf }, 415],
            [{ headers: { ...gzipHeaders, 'content-encoding': 'br' }, body: sampleProtobuf }, 415],
            [{ headers: protobufHeaders, body: Buffer.from([0x0a, 0xff]) }, 400],
            [{ headers: gzipHeaders, body: sampleProtobuf }, 400],
            [{ headers: jsonHeaders, body: '{"resourceMetrics": [' }, 400],
        ];
        for (const [request, status] of cases) {
            const response = await post(receiver.port, request);
            assert.equal(response.status, status, JSON.stringify(request.headers));
        }
        const get = await post(receiver.port, { method: 'GET' });
        assert.equal(get.status, 405);
        assert.equal(get.headers.allow, 'POST');
        const errors = receiver.lines('errors.txt');
        const statuses = ['1 404', '2 415', '3 415', '4 400', '5 400', '6 400'];
        assert.deepEqual(firstFields(errors, 2), statuses);
        const accepted = 'accepted: application/x-protobuf, application/json';
        assert.ok(errors[1].endsWith(`"text/plain"; ${accepted}`), errors[1]);
        assert.match(errors[3], /protobuf decode: /);
        assert.match(errors[4], /gunzip: /);
        assert.match(errors[5], /not JSON: /);
        // The GET is no POST, so it has no seq and no attempts line.
        assert.equal(receiver.lines('attempts.txt').length, 6);
        assert.equal(receiver.read('points.txt'), '');
    });

// --- Options -------------------------------------------------------------------------------------

test('--fail 2 --retry-after 1 answers two 503s with Retry-After, then 200', async (t) => {
    const receiver = await startReceiver(t, '--fail', '2', '--retry-after', '1');
    const send = () => post(receiver.port, { headers: protobufHeaders, body: sampleProtobuf });
    for (let i = 0; i < 2; ++i) {
        const response = await send();
        assert.equal(response.status, 503);
        assert.equal(response.headers['retry-after'], '1');
        assert.equal(response.body.toString(), 'unavailable');
    }
    const third = await send();
    assert.equal(third.status, 200);
    assert.equal(third.headers['retry-after'], undefined);
    assert.deepEqual(firstFields(receiver.lines('attempts.txt'), 2), ['1 503', '2 503', '3 200']);
    assert.deepEqual(firstFields(receiver.lines('points.txt'), 1), ['3', '3', '3']);
    assert.equal(receiver.read('errors.txt'), '');
});

test('--partial-success 3 answers partial_success in the request\'s encoding', async (t) => {
    const receiver = await startReceiver(t, '--partial-success', '3');
    const binary = await post(receiver.port, { headers: protobufHeaders, body: sampleProtobuf });
    assert.equal(binary.status, 200);
    assert.deepEqual(Response.decode(binary.body).toJSON(), {
        partialSuccess: { rejectedDataPoints: '3', errorMessage: 'test rejects 3 points' },
    });
    const json = await post(receiver.port, { headers: jsonHeaders, body: sampleJson });
    assert.equal(json.status, 200);
    assert.equal(json.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(json.body.toString()), {
        partialSuccess: { rejectedDataPoints: '3', errorMessage: 'test rejects 3 points' },
    });
    assert.equal(receiver.lines('points.txt').length, 6);
});

test('SIGTERM ends the receiver with status 0', async (t) => {
    const receiver = await startReceiver(t);
    assert.deepEqual(await receiver.stop(), { code: 0, signal: null });
});

test('an unknown option is a usage error that lists the accepted ones', () => {
    const args = [receiverPath, '--out', os.tmpdir(), '--colour', 'red'];
    const run = childProcess.spawnSync(process.execPath, args, { encoding: 'utf8' });
    assert.equal(run.status, 2);
    assert.match(run.stderr, /unknown option "--colour"; accepted: --out, --port, --fail, /);
});
