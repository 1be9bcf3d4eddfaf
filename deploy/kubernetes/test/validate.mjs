// Validates Kubernetes manifests against the schemas of the objects they declare: the core and
// apps APIs with kubernetes-models (JSON schemas generated from the Kubernetes OpenAPI
// specification), the Prometheus Operator's PodMonitor, ServiceMonitor and PrometheusRule with
// @kubernetes-models/prometheus-operator (generated from the operator's CRDs).
//
// Usage: node validate.mjs FILE...
//        node validate.mjs --carries ROOT FILE...
// Every document of every FILE must be an object of a known apiVersion and kind that passes its
// schema; a kustomization.yaml is checked for the files it lists instead. With --carries, every
// ConfigMap key must hold the bytes of the file of that name under ROOT/monitoring/, and every
// PrometheusRule's spec the rules file its annotation xtel/generated-from names, parsed.
//
// Exit status: 0 every document valid, 1 one is not (each named, with its errors, on stderr),
// 64 bad usage.
import fs from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parseAllDocuments, parse } from "yaml";

// apiVersion -> the module of its models.
const modules = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

async function model_of(apiVersion, kind) {
  const module = modules[apiVersion];
  if (!module) {
    return `apiVersion '${apiVersion}' is not one this check knows: expected one of ${Object.keys(modules).join(", ")}`;
  }
  const models = await import(module);
  const model = models[kind];
  if (typeof model !== "function" || model.kind !== kind) {
    return `kind '${kind}' is not a kind of ${apiVersion}`;
  }
  return model;
}

function monitoring_file(root, name) {
  for (const sub of ["rules", "dashboards"]) {
    const p = path.join(root, "monitoring", sub, name);
    if (fs.existsSync(p)) {
      return p;
    }
  }
  return null;
}

// What a generated object must carry: its keys' bytes, its rules.
const source_annotation = "xtel/generated-from";

function check_carried(root, object, where, errors) {
  if (object.kind === "ConfigMap") {
    for (const [key, value] of Object.entries(object.data ?? {})) {
      const p = monitoring_file(root, key);
      if (!p) {
        errors.push(`${where}: data key '${key}' names no file of monitoring/`);
      } else if (fs.readFileSync(p, "utf8") !== value) {
        errors.push(`${where}: data key '${key}' differs from ${path.relative(root, p)}`);
      }
    }
  } else if (object.kind === "PrometheusRule") {
    const source = object.metadata?.annotations?.[source_annotation] ?? "";
    if (!/^monitoring\/rules\/[^,\s]+$/.test(source)) {
      errors.push(`${where}: annotation ${source_annotation} does not name one rules file: '${source}'`);
      return;
    }
    if (!isDeepStrictEqual(parse(fs.readFileSync(path.join(root, source), "utf8")), object.spec)) {
      errors.push(`${where}: spec differs from ${source}`);
    }
  }
}

async function check_file(file, carries_root) {
  const errors = [];
  let text;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    return [`${file}: cannot be read: ${e.message}`];
  }
  const docs = parseAllDocuments(text, { prettyErrors: true });
  let count = 0;
  for (const [i, doc] of docs.entries()) {
    const where = `${file}, document ${i + 1}`;
    if (doc.errors.length) {
      errors.push(...doc.errors.map((e) => `${where}: not YAML: ${e.message}`));
      continue;
    }
    const object = doc.toJS();
    if (object === null || object === undefined) {
      continue;
    }
    ++count;
    if (typeof object !== "object" || Array.isArray(object)) {
      errors.push(`${where}: a Kubernetes object (a mapping) expected`);
      continue;
    }
    const name = `${object.kind ?? "?"} '${object.metadata?.name ?? "?"}'`;
    if (object.kind === "Kustomization") {
      for (const r of object.resources ?? []) {
        if (!fs.existsSync(path.join(path.dirname(file), r))) {
          errors.push(`${where}: resource '${r}' does not exist`);
        }
      }
      continue;
    }
    const model = await model_of(object.apiVersion, object.kind);
    if (typeof model === "string") {
      errors.push(`${where} (${name}): ${model}`);
      continue;
    }
    try {
      new model(object).validate();
    } catch (e) {
      const details = (e.errors ?? []).map((x) => `${x.instancePath || "/"} ${x.message}`);
      errors.push(`${where} (${name}): ${details.length ? details.join("; ") : e.message}`);
      continue;
    }
    if (!object.metadata?.name) {
      errors.push(`${where} (${name}): metadata.name is missing`);
    }
    if (carries_root) {
      check_carried(carries_root, object, `${where} (${name})`, errors);
    }
  }
  if (count === 0) {
    errors.push(`${file}: no Kubernetes object in it`);
  }
  return errors;
}

const args = process.argv.slice(2);
let carries_root = null;
if (args[0] === "--carries") {
  carries_root = args[1];
  args.splice(0, 2);
}
if (args.length === 0 || (carries_root === undefined)) {
  console.error("validate.mjs: usage: node validate.mjs [--carries ROOT] FILE...");
  process.exit(64);
}
let failed = 0;
for (const file of args) {
  const errors = await check_file(file, carries_root);
  if (errors.length) {
    ++failed;
    for (const e of errors) {
      console.error(e);
    }
  } else {
    console.log(`${file}: valid`);
  }
}
process.exit(failed ? 1 : 0);
