import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * WebhookVerificationError is a delivery verifyWebhook refused: a header
 * missing, a timestamp too far from now, or no signature that any of the
 * secrets made over the body. Answer such a request 401 and do not act on
 * it.
 */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(`timerq: webhook verification: ${message}`);
    this.name = "WebhookVerificationError";
  }
}

/** The headers of a request: a fetch Headers, or Node's req.headers (lower-case names). */
export type WebhookHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

/** Options of verifyWebhook. */
export interface VerifyWebhookOptions {
  /** How far webhook-timestamp may be from now, in seconds: 300 (5 minutes), as Standard Webhooks says. */
  toleranceSeconds?: number;
  /** The receiver's clock, for tests: a Date or milliseconds since the epoch. */
  now?: Date | number;
}

/** What a verified delivery's headers say. */
export interface VerifiedWebhook {
  /** webhook-id: the same on every attempt of one fire; deduplicate by it. */
  id: string;
  /** webhook-timestamp: when this attempt was signed. */
  timestamp: Date;
}

/** The default tolerance of webhook-timestamp, in seconds. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/**
 * verifyWebhook checks a delivery timerq signed, as Standard Webhooks
 * (https://www.standardwebhooks.com/) specifies, and returns its
 * webhook-id and webhook-timestamp; it throws WebhookVerificationError
 * otherwise.
 *
 * secret is the endpoint's signing secret, "whsec_" and the base64 of its
 * key; during a key rotation pass both secrets, and a signature by either
 * verifies. body must be the bytes as received (a Buffer from the request
 * stream, or `await req.arrayBuffer()` wrapped in a Uint8Array): JSON
 * parsed and serialised again is other bytes, and does not verify. A
 * string is taken as its UTF-8 bytes.
 *
 * It checks that webhook-id, webhook-timestamp and webhook-signature are
 * present, that webhook-timestamp (Unix seconds) is within
 * toleranceSeconds of now, and that one of the "v1,<base64>" signatures
 * in webhook-signature is the HMAC-SHA256 of
 * "<webhook-id>.<webhook-timestamp>.<body>" under a secret's key,
 * comparing in constant time.
 */
export function verifyWebhook(
  secret: string | readonly string[],
  headers: WebhookHeaders,
  body: string | Uint8Array,
  options: VerifyWebhookOptions = {},
): VerifiedWebhook {
  const keys = (typeof secret === "string" ? [secret] : secret).map(secretKey);
  if (keys.length === 0) throw new TypeError("timerq: verifyWebhook: no secret given");
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !ts || !sigs) {
    throw new WebhookVerificationError("a webhook-id, webhook-timestamp or webhook-signature header is missing");
  }
  if (!/^[0-9]{1,15}$/.test(ts)) {
    throw new WebhookVerificationError(`webhook-timestamp ${JSON.stringify(ts.slice(0, 32))} is not Unix seconds`);
  }
  const sent = Number(ts);
  const now = options.now === undefined ? Date.now() : typeof options.now === "number" ? options.now : options.now.getTime();
  const tolerance = options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  const off = Math.floor(now / 1000) - sent;
  if (off > tolerance || off < -tolerance) {
    throw new WebhookVerificationError(`webhook-timestamp is ${Math.abs(off)} s ${off > 0 ? "old" : "ahead"}, more than the ${tolerance} s allowed`);
  }
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  const candidates = sigs.split(" ").filter((s) => s.startsWith("v1,")).map((s) => Buffer.from(s.slice(3), "utf8"));
  for (const key of keys) {
    const want = Buffer.from(createHmac("sha256", key).update(`${id}.${ts}.`).update(bytes).digest("base64"), "utf8");
    for (const got of candidates) {
      if (got.length === want.length && timingSafeEqual(got, want)) return { id, timestamp: new Date(sent * 1000) };
    }
  }
  throw new WebhookVerificationError(
    `none of the ${candidates.length} v1 signatures matches any of the ${keys.length} secrets (is the body the raw bytes received?)`,
  );
}

/** secretKey decodes "whsec_<base64>" (or the bare base64) to the key's bytes. */
function secretKey(secret: string): Buffer {
  const b64 = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  if (b64.length === 0 || b64.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) {
    throw new TypeError('timerq: verifyWebhook: the secret is not "whsec_" and standard base64 (copy it as the endpoint\'s secrets list shows it when set)');
  }
  return Buffer.from(b64, "base64");
}

/** header reads one header by its lower-case name, whatever the case of the keys given. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function" && typeof (headers as Headers).has === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  const rec = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  let v = rec[name];
  if (v === undefined) {
    for (const k of Object.keys(rec)) {
      if (k.toLowerCase() === name) {
        v = rec[k];
        break;
      }
    }
  }
  return typeof v === "string" ? v : v?.[0];
}
