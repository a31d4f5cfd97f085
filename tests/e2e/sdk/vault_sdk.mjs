// The OpenSandbox JS SDK's Credential Vault adapter (EgressAdapter of
// @alibaba-group/opensandbox, pinned in package-lock.json) driven against
// egressd unchanged (issue 18). e2e proxy_vault_sdk runs one phase a call,
// as root in the sandbox namespace, and checks the origin between phases:
//   node vault_sdk.mjs SOCKET TOKEN HOST add       create, list, add, reads
//   node vault_sdk.mjs SOCKET TOKEN HOST replace   stale 409, replace
//   node vault_sdk.mjs SOCKET TOKEN HOST delete    delete, then 404s
// The value add and replace write comes in $VAULT_SDK_VALUE (not argv,
// which every uid can read) and is never printed. The only change to the
// SDK's defaults is its own rawHttp.fetch option: a fetch that speaks HTTP
// over egressd's Unix API socket, since vault writes are accepted only from
// loopback or that socket and nft keeps the pod's unmarked sockets off the
// TCP port. One line a step; exit 0 all as expected, 1 a mismatch, 2 usage,
// 77 the SDK is not installed (skipped, never passed).
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const SKIP = 77;
const TIMEOUT_MS = 5000; // one API call, as the shell tests' curl --max-time 5

if (!fs.existsSync(path.join(here, "node_modules/@alibaba-group/opensandbox"))) {
  console.log("SKIP the SDK is not installed: run ./run deps (npm ci in tests/e2e/sdk)");
  process.exit(SKIP);
}
const { EgressAdapter, createEgressClient } = await import(
  "@alibaba-group/opensandbox/internal"
);
const { SandboxApiException } = await import("@alibaba-group/opensandbox");

const [socketPath, token, host, phase] = process.argv.slice(2);
if (!socketPath || !token || !host || !["add", "replace", "delete"].includes(phase)) {
  console.error("usage: node vault_sdk.mjs SOCKET TOKEN HOST add|replace|delete");
  process.exit(2);
}
const value = process.env.VAULT_SDK_VALUE ?? "";
if (phase !== "delete" && value === "") {
  console.error(`vault_sdk: phase ${phase} needs VAULT_SDK_VALUE`);
  process.exit(2);
}

// unixFetch(input, init): the subset of fetch the SDK's vault calls use
// (string or URL input; method, headers, string body), over the Unix
// socket; the URL's host is only the Host header. One connection a request.
function unixFetch(input, init = {}) {
  const url = new URL(typeof input === "string" ? input : input.href);
  const headers = Object.fromEntries(new Headers(init.headers ?? {}));
  const body = init.body ?? null;
  if (body !== null && typeof body !== "string") {
    return Promise.reject(new TypeError("unixFetch: only string bodies"));
  }
  if (body !== null) headers["content-length"] = String(Buffer.byteLength(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath,
        method: init.method ?? "GET",
        path: url.pathname + url.search,
        headers: { host: url.host, ...headers },
        agent: false,
        timeout: TIMEOUT_MS,
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const h = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
            h.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
          }
          // A Response for 204 or 304 must not have a body, not even "".
          const nobody = res.statusCode === 204 || res.statusCode === 304;
          resolve(
            new Response(nobody ? null : Buffer.concat(chunks), {
              status: res.statusCode,
              statusText: res.statusMessage,
              headers: h,
            }),
          );
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer in ${TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body ?? undefined);
  });
}

const baseUrl = "http://egressd";
const headers = { "OPENSANDBOX-EGRESS-AUTH": token };
// As the SDK's own DefaultAdapterFactory.createEgressStack builds it; the
// openapi-fetch client (getPolicy/patchRules) is built without a request.
const vault = new EgressAdapter(
  createEgressClient({ baseUrl, headers, fetch: unixFetch }),
  { baseUrl, headers, fetch: unixFetch },
);

let failures = 0;
function fail(what) {
  failures++;
  console.log(`FAIL ${what}`);
}
// Every SDK answer is checked for the value before anything of it is shown.
function show(x) {
  const s = JSON.stringify(x) ?? "undefined";
  if (value !== "" && s.includes(value)) {
    fail("an SDK answer holds the credential value (not shown)");
    return "<withheld>";
  }
  return s;
}
// step(NAME, CALL, CHECK): CHECK(result) returns "" or what is wrong.
async function step(name, call, check) {
  let r;
  try {
    r = await call();
  } catch (e) {
    const status = e instanceof SandboxApiException ? ` status ${e.statusCode}` : "";
    fail(`${name}: threw ${e?.name}${status}: ${show(String(e?.message).trim())}`);
    return undefined;
  }
  const wrong = check(r);
  if (wrong) fail(`${name}: ${wrong}; got ${show(r)}`);
  else console.log(`ok   ${name}: ${show(r)}`);
  return r;
}
// rejects(NAME, CALL, STATUS, MESSAGE): the SDK must throw its
// SandboxApiException with that statusCode and message.
async function rejects(name, call, status, message) {
  let r;
  try {
    r = await call();
  } catch (e) {
    const msg = String(e?.message).trim();
    if (!(e instanceof SandboxApiException)) {
      fail(`${name}: threw ${e?.name}, not SandboxApiException: ${show(msg)}`);
    } else if (e.statusCode !== status || msg !== message) {
      fail(`${name}: expected ${status} ${show(message)}, got ${e.statusCode} ${show(msg)}`);
    } else {
      console.log(`ok   ${name}: SandboxApiException ${e.statusCode} ${show(msg)}`);
    }
    return;
  }
  fail(`${name}: expected SandboxApiException ${status}, got ${show(r)}`);
}

const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const want = (cond, what) => (cond ? "" : what);
const CRED = "sdk-key";
const BIND = "sdk-bearer";
const cred = (revision) => ({ name: CRED, sourceType: "inline", revision });
// The binding as egressd answers it: defaults filled in, no credential.
const sameBinding = (b, revision) =>
  eq(b, {
    name: BIND,
    revision,
    match: {
      hosts: [host],
      schemes: ["https"],
      methods: ["GET", "POST", "PUT", "PATCH", "DELETE"],
      paths: ["/v1/*"],
    },
    auth: { type: "bearer" },
  });

if (phase === "add") {
  await step(
    "create (empty)",
    () => vault.create({ credentials: [], bindings: [] }),
    (s) => want(eq(s, { revision: 1, credentials: [], bindings: [] }), "not revision 1, empty"),
  );
  await step(
    "listCredentials",
    () => vault.listCredentials(),
    (l) => want(eq(l, []), "not empty"),
  );
  await step(
    "patch add (inline credential, bearer binding)",
    () =>
      vault.patch({
        expectedRevision: 1,
        credentials: { add: [{ name: CRED, source: { type: "inline", value } }] },
        bindings: {
          add: [
            {
              name: BIND,
              match: { hosts: [host], paths: ["/v1/*"] },
              auth: { type: "bearer", credential: CRED },
            },
          ],
        },
      }),
    (s) =>
      want(
        s.revision === 2 &&
          eq(s.credentials, [cred(2)]) &&
          s.bindings.length === 1 &&
          sameBinding(s.bindings[0], 2),
        "not revision 2 with the credential and the binding at 2",
      ),
  );
  await step(
    "get",
    () => vault.get(),
    (s) =>
      want(
        s.revision === 2 &&
          eq(s.credentials, [cred(2)]) &&
          s.bindings.length === 1 &&
          sameBinding(s.bindings[0], 2),
        "not the state the patch answered",
      ),
  );
  await step(
    `getCredential ${CRED}`,
    () => vault.getCredential(CRED),
    (c) => want(eq(c, cred(2)), "not the credential's metadata at revision 2"),
  );
  await step(
    `getBinding ${BIND}`,
    () => vault.getBinding(BIND),
    (b) => want(sameBinding(b, 2), "not the binding at revision 2"),
  );
  await step(
    "listBindings",
    () => vault.listBindings(),
    (l) => want(l.length === 1 && sameBinding(l[0], 2), "not the one binding"),
  );
} else if (phase === "replace") {
  await rejects(
    "patch with a stale expectedRevision",
    () => vault.patch({ expectedRevision: 1 }),
    409,
    "expectedRevision 1 does not match current revision 2",
  );
  await step(
    "patch replace the value",
    () =>
      vault.patch({
        expectedRevision: 2,
        credentials: { replace: [{ name: CRED, source: { type: "inline", value } }] },
      }),
    (s) =>
      want(
        s.revision === 3 &&
          eq(s.credentials, [cred(3)]) &&
          s.bindings.length === 1 &&
          sameBinding(s.bindings[0], 2),
        "not revision 3 with the credential at 3 and the binding still at 2",
      ),
  );
} else {
  await step(
    "delete",
    () => vault.delete(),
    (r) => want(r === undefined, "not undefined"),
  );
  await rejects("get after delete", () => vault.get(), 404, "credential vault not found");
  await rejects(
    `getCredential ${CRED} after delete`,
    () => vault.getCredential(CRED),
    404,
    "credential vault not found",
  );
}
console.log(`${phase}: ${failures ? `${failures} failed` : "all as expected"}`);
process.exit(failures ? 1 : 0);
