'use strict';
// OTLP/JSON, checked against the form a sender must write, then decoded by the generated types.
//
// A production receiver is lenient; this one stands in a test of xtel's JSON encoder, so a mistake
// there must fail the test instead of being absorbed. The rules (OTLP specification, "JSON
// Protobuf Encoding", on top of the proto3 JSON mapping), and where this receiver is stricter:
//   - Keys are the lowerCamelCase field names. Every key must be a field of its message: the
//     specification tells receivers to ignore unknown keys, and fromObject does, so a misspelt key
//     would lose its data without a word; here it is an error.
//   - 64-bit integers (int64, uint64, fixed64, sfixed64) are JSON strings of decimal digits, '-'
//     first only for signed types, within the type's range, without leading zeros. Decoders also
//     take JSON numbers, but a number past 2^53 has already lost digits in some JSON library.
//   - Enums are JSON numbers (integers); OTLP forbids enum names.
//   - traceId is a hex string of 16 bytes, spanId and parentSpanId of 8 (either case, as the
//     specification says), or "" for none. Other bytes fields are standard padded base64.
//   - 32-bit integers are integral JSON numbers in range; doubles are numbers or "NaN",
//     "Infinity", "-Infinity"; bools are true or false; strings are strings; a message is an
//     object; a repeated field is an array. null stands for an absent field, as in proto3 JSON.
//   - At most one member of a oneof is present.
const { Long } = require('./otlp_root');

const hexBytes = { traceId: 16, spanId: 8, parentSpanId: 8 };
const specialDoubles = new Set(['NaN', 'Infinity', '-Infinity']);
const ranges = {
    int64: [-(2n ** 63n), 2n ** 63n - 1n],
    uint64: [0n, 2n ** 64n - 1n],
    int32: [-(2 ** 31), 2 ** 31 - 1],
    uint32: [0, 2 ** 32 - 1],
};

class JsonRuleError extends Error {}

// --- What the generated module says about its messages -------------------------------------------
//
// A protobufjs static module carries no reflection: no field lists, no field types, only each
// message's functions (fromObject, encode, decode) and a prototype with one property per field.
// So each message is described once, at start-up, by asking those functions how they treat a
// probe value. The answers come from the same code that decodes, so they cannot disagree with it.

// Every message constructor under root, by full name ("opentelemetry.proto.metrics.v1.Metric").
function messageTypes(root) {
    const found = new Map();
    const walk = (object, prefix) => {
        for (const [key, value] of Object.entries(object)) {
            if (typeof value === 'function' && typeof value.fromObject === 'function') {
                found.set(prefix + key, value);
                walk(value, prefix + key + '.');
            } else if (value !== null && typeof value === 'object' && /^[a-z]/.test(key)) {
                walk(value, prefix + key + '.'); // a package namespace; enums are capitalised
            }
        }
    };
    walk(root, '');
    return found;
}

// fromObject with one field set; a TypeError (what the generated code throws for a value of the
// wrong shape) comes back as text.
function probe(Type, field, value) {
    try {
        return { message: Type.fromObject({ [field]: value }) };
    } catch (e) {
        if (!(e instanceof TypeError)) throw e;
        return { error: e.message };
    }
}

// One field's shape: { repeated, kind, typeName } where kind is message, enum, int64, uint64,
// int32, uint32, double, bool, string or bytes, and typeName names a message field's type.
function describeField(Type, typeName, field, types) {
    let repeated = false;
    // "1234" is a valid number, 64-bit string, base64 text and string, and no enum's name.
    let first = probe(Type, field, '1234');
    if (first.error && first.error.endsWith('array expected')) {
        repeated = true;
        first = probe(Type, field, ['1234']);
    }
    const wrap = (value) => (repeated ? [value] : value);
    const read = (message) => (repeated ? message[field][0] : message[field]);
    if (first.error && first.error.endsWith('object expected')) {
        // fromObject hands back an instance of the field's own type untouched; that finds it.
        for (const [name, Candidate] of types) {
            const instance = new Candidate();
            if (read(Type.fromObject({ [field]: wrap(instance) })) === instance) {
                return { repeated, kind: 'message', typeName: name };
            }
        }
    }
    if (first.error) {
        throw new Error(`cannot describe ${typeName}.${field}: ${first.error}`);
    }
    const value = read(first.message);
    if (value === null || value === undefined) return { repeated, kind: 'enum' };
    if (Long.isLong(value)) {
        // fromObject marks fixed64 values signed; the wire decoder knows better.
        const wire = Type.decode(Type.encode(Type.fromObject({ [field]: wrap('-1') })).finish());
        return { repeated, kind: read(wire).unsigned ? 'uint64' : 'int64' };
    }
    if (typeof value === 'string') return { repeated, kind: 'string' };
    if (typeof value === 'boolean') return { repeated, kind: 'bool' };
    if (value instanceof Uint8Array) return { repeated, kind: 'bytes' };
    if (typeof value === 'number') {
        const n = read(probe(Type, field, wrap(-1.5)).message);
        return { repeated, kind: n === -1.5 ? 'double' : n < 0 ? 'int32' : 'uint32' };
    }
    throw new Error(`cannot describe ${typeName}.${field}: fromObject made ${typeof value}`);
}

// { name, fields: Map<jsonName, field shape>, oneofs: [[member, ...], ...] } for one message.
function describeMessage(Type, typeName, types) {
    const fields = new Map();
    const accessors = [];
    for (const key of Object.getOwnPropertyNames(Type.prototype)) {
        const property = Object.getOwnPropertyDescriptor(Type.prototype, key);
        if (property.get) accessors.push(key); // a oneof's virtual "which member is set"
        else if (key !== 'constructor' && typeof property.value !== 'function') {
            fields.set(key, describeField(Type, typeName, key, types));
        }
    }
    const oneofs = accessors.map((accessor) =>
        [...fields.keys()].filter((field) => {
            const message = new Type();
            message[field] = 1;
            return message[accessor] === field;
        }),
    );
    return { name: typeName, fields, oneofs };
}

function describeAll(root) {
    const types = messageTypes(root);
    const byName = new Map();
    for (const [name, Type] of types) byName.set(name, describeMessage(Type, name, types));
    return byName;
}

// --- Checking a parsed JSON value ----------------------------------------------------------------

function fail(path, what) {
    throw new JsonRuleError(`${path || '(top level)'}: ${what}`);
}

function show(value) {
    return JSON.stringify(value);
}

function camelCase(key) {
    return key.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

// The checked value with hex ids turned into bytes, ready for fromObject (which would read hex
// as base64).
function checkMessage(object, message, all, path) {
    if (object === null || typeof object !== 'object' || Array.isArray(object)) {
        fail(path, `expected an object (${message.name}), got ${show(object)}`);
    }
    const converted = {};
    for (const [key, value] of Object.entries(object)) {
        const field = message.fields.get(key);
        const at = path ? `${path}.${key}` : key;
        if (!field) {
            const hint = message.fields.has(camelCase(key))
                ? `; keys are lowerCamelCase: "${camelCase(key)}"`
                : `; ${message.name} has ${[...message.fields.keys()].join(', ')}`;
            fail(at, `unknown field "${key}"${hint}`);
        }
        if (value === null) continue;
        if (field.repeated) {
            if (!Array.isArray(value)) fail(at, `expected an array, got ${show(value)}`);
            converted[key] = value.map((v, i) => checkValue(v, key, field, all, `${at}[${i}]`));
        } else {
            converted[key] = checkValue(value, key, field, all, at);
        }
    }
    for (const members of message.oneofs) {
        const present = members.filter((m) => object[m] !== undefined && object[m] !== null);
        if (present.length > 1) fail(path, `${present.join(' and ')} are one oneof; send one`);
    }
    return converted;
}

function checkLong(value, kind, at) {
    const form = kind === 'int64' ? /^(0|-?[1-9][0-9]*)$/ : /^(0|[1-9][0-9]*)$/;
    if (typeof value !== 'string' || !form.test(value)) {
        const sign = kind === 'int64' ? " ('-' allowed)" : '';
        fail(at, `a 64-bit integer is a JSON string of decimal digits${sign}, got ${show(value)}`);
    }
    const [low, high] = ranges[kind];
    const n = BigInt(value);
    if (n < low || n > high) fail(at, `${value} is out of range for ${kind} (${low} to ${high})`);
    return value;
}

function checkInt(value, kind, at) {
    const [low, high] = ranges[kind];
    if (!Number.isInteger(value) || value < low || value > high) {
        fail(at, `expected a JSON number, an ${kind} (${low} to ${high}), got ${show(value)}`);
    }
    return value;
}

function checkHexId(value, bytes, at) {
    const form = new RegExp(`^([0-9a-fA-F]{${2 * bytes}})?$`);
    if (typeof value !== 'string' || !form.test(value)) {
        const expected = `${bytes} bytes as ${2 * bytes} hex digits (not base64)`;
        fail(at, `expected ${expected}, got ${show(value)}`);
    }
    return Buffer.from(value, 'hex');
}

function checkBase64(value, at) {
    const form = /^[A-Za-z0-9+/]*={0,2}$/;
    if (typeof value !== 'string' || value.length % 4 !== 0 || !form.test(value)) {
        fail(at, `expected standard padded base64, got ${show(value)}`);
    }
    return value;
}

function checkType(value, type, expected, at) {
    if (typeof value !== type) fail(at, `expected ${expected}, got ${show(value)}`);
    return value;
}

// One value of a field (one element, for a repeated field), checked and converted.
function checkValue(value, key, field, all, at) {
    switch (field.kind) {
        case 'message':
            return checkMessage(value, all.get(field.typeName), all, at);
        case 'int64':
        case 'uint64':
            return checkLong(value, field.kind, at);
        case 'int32':
        case 'uint32':
            return checkInt(value, field.kind, at);
        case 'enum':
            if (!Number.isInteger(value)) {
                fail(at, `an enum is a JSON number (OTLP JSON forbids names), got ${show(value)}`);
            }
            return value;
        case 'double':
            if (typeof value !== 'number' && !specialDoubles.has(value)) {
                const expected = 'a JSON number or "NaN", "Infinity", "-Infinity"';
                fail(at, `expected ${expected}, got ${show(value)}`);
            }
            return value;
        case 'bool':
            return checkType(value, 'boolean', 'true or false', at);
        case 'string':
            return checkType(value, 'string', 'a string', at);
        case 'bytes':
            return key in hexBytes ? checkHexId(value, hexBytes[key], at) : checkBase64(value, at);
    }
    throw new Error(`${at}: field kind ${field.kind} has no rule`);
}

// --- Decoding ------------------------------------------------------------------------------------

// A JSON body decoded as Type, or a JsonRuleError that says what is wrong and where.
function makeJsonDecoder(root, Type, typeName) {
    const all = describeAll(root);
    const message = all.get(typeName);
    if (!message) throw new Error(`the generated module has no message ${typeName}`);
    return (text) => {
        let parsed;
        try {
            parsed = JSON.parse(text);
        } catch (e) {
            throw new JsonRuleError(`not JSON: ${e.message}`);
        }
        const converted = checkMessage(parsed, message, all, '');
        // Through the wire and back: fromObject marks fixed64 values signed, so a count of 2^63 or
        // more would read negative; decode gives the values the protobuf path gives.
        return Type.decode(Type.encode(Type.fromObject(converted)).finish());
    };
}

module.exports = { makeJsonDecoder, JsonRuleError, describeAll };
