// verifyWebhook against two verifiers we did not write, the npm packages
// standardwebhooks (the reference implementation) and svix, on the same
// deliveries: messages they sign, and the test vectors that timerq's own
// signer (deliver.Sign) made in the Go test (clients/clients_test.go),
// which writes them to the file TIMERQ_WEBHOOK_VECTORS names. Every
// verifier must agree on every vector, including a tampered body and a
// stale timestamp. Without TIMERQ_WEBHOOK_VECTORS the vector tests skip
// (the Go test fails on a skip).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { verifyWebhook, WebhookVerificationError } from "@timerq/client";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook, WebhookVerificationError as SvixVerificationError } from "svix";

/** One delivery of the Go test's vectors. */
interface Vector {
  name: string;
  /** The receiver's secrets: it accepts a signature by any of them. */
  secrets: string[];
  headers: Record<string, string>;
  /** The body's bytes, base64. */
  body: string | null;
  /** What deliver.Verify says. */
  valid: boolean;
  /** Whether the body is UTF-8 text: svix 1.x verifies only text (docs/delivery.md). */
  utf8: boolean;
}

const vectorsFile = process.env["TIMERQ_WEBHOOK_VECTORS"] ?? "";
const vectors: Vector[] = vectorsFile ? (JSON.parse(readFileSync(vectorsFile, "utf8")) as { cases: Vector[] }).cases : [];
const noVectors = vectorsFile ? {} : { skip: "TIMERQ_WEBHOOK_VECTORS is not set: go test ./clients/ writes deliver.Sign's vectors and sets it" };

function ours(secrets: string[], headers: Record<string, string>, body: Uint8Array): boolean {
  try {
    verifyWebhook(secrets, headers, body);
    return true;
  } catch (e) {
    assert.ok(e instanceof WebhookVerificationError, `verifyWebhook threw ${String(e)}`);
    return false;
  }
}

function standard(secrets: string[], headers: Record<string, string>, body: Uint8Array): boolean {
  return secrets.some((s) => {
    try {
      new StandardWebhook(s).verify(body, headers, { jsonParse: false });
      return true;
    } catch {
      return false;
    }
  });
}

/** svix 1.x parses the body as JSON once verified: a SyntaxError then means it verified. */
function svix(secrets: string[], headers: Record<string, string>, body: Uint8Array): boolean {
  return secrets.some((s) => {
    try {
      new SvixWebhook(s).verify(Buffer.from(body).toString("utf8"), headers);
      return true;
    } catch (e) {
      if (e instanceof SvixVerificationError) return false;
      assert.ok(e instanceof SyntaxError, `svix threw ${String(e)}`);
      return true;
    }
  });
}

test("deliver.Sign's vectors: verifyWebhook, standardwebhooks and svix agree with deliver.Verify", noVectors, () => {
  assert.ok(vectors.length >= 10, `only ${vectors.length} vectors`);
  let refusedSeen = 0;
  for (const v of vectors) {
    const body = Buffer.from(v.body ?? "", "base64");
    assert.equal(ours(v.secrets, v.headers, body), v.valid, `verifyWebhook on ${v.name}`);
    assert.equal(standard(v.secrets, v.headers, body), v.valid, `standardwebhooks on ${v.name}`);
    if (v.utf8) assert.equal(svix(v.secrets, v.headers, body), v.valid, `svix on ${v.name}`);
    if (!v.valid) refusedSeen++;
  }
  assert.ok(refusedSeen >= 5 && refusedSeen < vectors.length, "the vectors hold both verdicts");
});

test("deliver.Sign's signatures are the ones standardwebhooks and svix make for the same message", noVectors, () => {
  let n = 0;
  for (const v of vectors) {
    const sig = v.headers["webhook-signature"] ?? "";
    if (!v.valid || v.secrets.length !== 1 || sig.includes(" ")) continue;
    const body = Buffer.from(v.body ?? "", "base64");
    const id = v.headers["webhook-id"] ?? "";
    const at = new Date(Number(v.headers["webhook-timestamp"]) * 1000);
    const secret = v.secrets[0]!;
    assert.equal(new StandardWebhook(secret).sign(id, at, body), sig, `standardwebhooks.sign on ${v.name}`);
    if (v.utf8) assert.equal(new SvixWebhook(secret).sign(id, at, body.toString("utf8")), sig, `svix.sign on ${v.name}`);
    n++;
  }
  assert.ok(n >= 3, `only ${n} single-signature vectors compared`);
});

const secret = "whsec_" + randomBytes(32).toString("base64");
const other = "whsec_" + randomBytes(32).toString("base64");

/** signed is a delivery signed by a verifier we did not write, at a time given. */
function signed(lib: "standardwebhooks" | "svix", body: string, at = new Date(), key = secret): Record<string, string> {
  const id = "msg_" + randomBytes(24).toString("base64url").slice(0, 32);
  const sig = lib === "svix" ? new SvixWebhook(key).sign(id, at, body) : new StandardWebhook(key).sign(id, at, body);
  return { "webhook-id": id, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": sig };
}

for (const lib of ["standardwebhooks", "svix"] as const) {
  test(`${lib} signs, verifyWebhook accepts; tampered, stale, future or by another key, it refuses`, () => {
    const body = JSON.stringify({ order: 42, note: "é ✓" });
    const h = signed(lib, body);
    const got = verifyWebhook(secret, h, Buffer.from(body));
    assert.equal(got.id, h["webhook-id"]);
    assert.equal(got.timestamp.getTime(), Number(h["webhook-timestamp"]) * 1000);
    verifyWebhook(secret, h, body); // a string is its UTF-8 bytes
    verifyWebhook([other, secret], h, body); // a rotation: either secret
    verifyWebhook(secret, new Headers(h), body); // fetch's Headers
    verifyWebhook(secret, { "Webhook-Id": h["webhook-id"], "WEBHOOK-TIMESTAMP": h["webhook-timestamp"], "webhook-signature": h["webhook-signature"] }, body);

    const refuse = (why: string, s: string | string[], hh: Record<string, string>, b: string) =>
      assert.throws(() => verifyWebhook(s, hh, b), WebhookVerificationError, why);
    refuse("a tampered body", secret, h, body.replace("42", "43"));
    refuse("another key", other, h, body);
    refuse("a tampered id", secret, { ...h, "webhook-id": h["webhook-id"] + "x" }, body);
    refuse("a signature header without v1", secret, { ...h, "webhook-signature": h["webhook-signature"]!.replace("v1,", "v2,") }, body);
    const { ["webhook-signature"]: _, ...noSig } = h;
    refuse("no signature", secret, noSig, body);
    refuse("a stale timestamp", secret, signed(lib, body, new Date(Date.now() - 6 * 60_000)), body);
    refuse("a future timestamp", secret, signed(lib, body, new Date(Date.now() + 6 * 60_000)), body);
    // Within the 5 minutes either way, and a tolerance of one's own.
    verifyWebhook(secret, signed(lib, body, new Date(Date.now() - 4 * 60_000)), body);
    const old = signed(lib, body, new Date(Date.now() - 4 * 60_000));
    assert.throws(() => verifyWebhook(secret, old, body, { toleranceSeconds: 60 }), WebhookVerificationError);
    verifyWebhook(secret, old, body, { now: Number(old["webhook-timestamp"]) * 1000 });
  });
}

test("a secret that is not whsec_ and base64 is a TypeError, not a refused delivery", () => {
  const h = signed("standardwebhooks", "{}");
  assert.throws(() => verifyWebhook("whsec_not base64!", h, "{}"), TypeError);
  assert.throws(() => verifyWebhook([], h, "{}"), TypeError);
});
