// The OpenSandbox server's path to the Credential Vault (issue 39): the JS
// SDK's egress stack, built exactly as Sandbox.create builds it
// (DefaultAdapterFactory.createEgressStack with a ConnectionConfig, its
// own transport, and the endpoint the server hands out: execd's
// /proxy/18080 relay and the egress auth header), with nothing of the SDK
// replaced. e2e api_execd_relay runs it from the node's namespace:
//   node vault_relay.mjs BASEURL HOST create   create a vault with one
//                                               credential and one binding,
//                                               read it back
//   node vault_relay.mjs BASEURL HOST get      one get; prints its outcome
// BASEURL is the egress endpoint (http://POD:44772/proxy/18080); the token
// comes in $VAULT_SDK_TOKEN and the value in $VAULT_SDK_VALUE (not argv,
// which every uid can read); neither is printed. One line a step:
// "ok   STEP: RESULT" or "FAIL STEP: ..."; get prints "get: ok REVISION"
// or "get: SandboxApiException STATUS MESSAGE" / "get: NAME MESSAGE".
// Exit 0 all as expected (get: the call succeeded), 1 otherwise, 2 usage,
// 77 the SDK is not installed.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, "node_modules/@alibaba-group/opensandbox"))) {
  console.log("SKIP the SDK is not installed: run ./run deps (npm ci in tests/e2e/sdk)");
  process.exit(77);
}
const { ConnectionConfig, createDefaultAdapterFactory, SandboxApiException } =
  await import("@alibaba-group/opensandbox");

const [baseUrl, host, phase] = process.argv.slice(2);
const token = process.env.VAULT_SDK_TOKEN ?? "";
const value = process.env.VAULT_SDK_VALUE ?? "";
if (!baseUrl || !host || !["create", "get"].includes(phase) || token === "" ||
    (phase === "create" && value === "")) {
  console.error("usage: VAULT_SDK_TOKEN=T [VAULT_SDK_VALUE=V] node vault_relay.mjs BASEURL HOST create|get");
  process.exit(2);
}

// The server gives the SDK the endpoint and the headers to send with it;
// the SDK does the rest (sandbox.ts: createEgressStack).
const connectionConfig = new ConnectionConfig({
  domain: "lifecycle.invalid:8080",
  requestTimeoutSeconds: 10,
  disableMetrics: true,
}).withTransportIfMissing();
const { credentialVault: vault } = createDefaultAdapterFactory().createEgressStack({
  connectionConfig,
  egressBaseUrl: baseUrl,
  endpointHeaders: { "OPENSANDBOX-EGRESS-AUTH": token },
});

function show(x) {
  const s = JSON.stringify(x) ?? "undefined";
  return value !== "" && s.includes(value) ? "<withheld: holds the value>" : s;
}
function why(e) {
  const msg = show(String(e?.message).trim());
  return e instanceof SandboxApiException
    ? `SandboxApiException ${e.statusCode} ${msg}`
    : `${e?.name} ${msg}`;
}

let failures = 0;
if (phase === "create") {
  const binding = {
    name: "relay-bearer",
    match: { hosts: [host], paths: ["/v1/*"] },
    auth: { type: "bearer", credential: "relay-key" },
  };
  try {
    const s = await vault.create({
      credentials: [{ name: "relay-key", source: { type: "inline", value } }],
      bindings: [binding],
    });
    console.log(`ok   create: ${show(s)}`);
    const g = await vault.get();
    console.log(`ok   get: ${show(g)}`);
    const b = await vault.getBinding("relay-bearer");
    console.log(`ok   getBinding: ${show(b)}`);
  } catch (e) {
    failures++;
    console.log(`FAIL create: ${why(e)}`);
  }
} else {
  try {
    const g = await vault.get();
    console.log(`get: ok ${g.revision}`);
  } catch (e) {
    failures++;
    console.log(`get: ${why(e)}`);
  }
}
await connectionConfig.closeTransport?.().catch(() => {});
process.exit(failures ? 1 : 0);
