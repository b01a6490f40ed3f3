"""verify_webhook on deliver.Sign's test vectors (the file
TIMERQ_WEBHOOK_VECTORS names, written by go test ./clients/, on which the
TypeScript tests check that the npm packages standardwebhooks and svix give
the same verdicts), and on deliveries signed here."""

import base64
import hashlib
import hmac
import http.client
import json
import os
import time
import unittest

from timerq_client import WebhookVerificationError, verify_webhook

VECTORS = os.environ.get("TIMERQ_WEBHOOK_VECTORS", "")


def sign(secret: str, msg_id: str, ts: int, body: bytes) -> dict:
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": "v1," + base64.b64encode(mac).decode()}


SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
OTHER = "whsec_" + base64.b64encode(bytes(range(100, 132))).decode()
BODY = json.dumps({"order": 42, "note": "é ✓"}).encode()


class Vectors(unittest.TestCase):
    @unittest.skipUnless(VECTORS, "TIMERQ_WEBHOOK_VECTORS is not set: go test ./clients/ writes deliver.Sign's vectors and sets it")
    def test_agrees_with_deliver(self):
        with open(VECTORS, encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        self.assertGreaterEqual(len(cases), 10)
        self.assertTrue(any(c["valid"] for c in cases) and not all(c["valid"] for c in cases))
        for c in cases:
            body = base64.b64decode(c["body"] or "")
            with self.subTest(c["name"]):
                try:
                    verify_webhook(c["secrets"], c["headers"], body)
                    got = True
                except WebhookVerificationError:
                    got = False
                self.assertEqual(got, c["valid"])


class Verify(unittest.TestCase):
    def test_accepts_and_returns_the_id(self):
        now = int(time.time())
        h = sign(SECRET, "msg_abc", now, BODY)
        got = verify_webhook(SECRET, h, BODY)
        self.assertEqual(got.id, "msg_abc")
        self.assertEqual(int(got.timestamp.timestamp()), now)
        verify_webhook(SECRET, h, BODY.decode())  # a str is its UTF-8 bytes
        verify_webhook([OTHER, SECRET], h, BODY)  # a rotation: either key

    def test_headers_in_any_case_and_http_message(self):
        h = sign(SECRET, "msg_abc", int(time.time()), BODY)
        verify_webhook(SECRET, {k.upper(): v for k, v in h.items()}, BODY)
        msg = http.client.HTTPMessage()
        for k, v in h.items():
            msg[k.title()] = v
        verify_webhook(SECRET, msg, BODY)

    def test_refuses(self):
        now = int(time.time())
        h = sign(SECRET, "msg_abc", now, BODY)
        for why, secret, headers, body in [
            ("a tampered body", SECRET, h, BODY.replace(b"42", b"43")),
            ("another key", OTHER, h, BODY),
            ("a tampered id", SECRET, {**h, "webhook-id": "msg_abd"}, BODY),
            ("a stale timestamp", SECRET, sign(SECRET, "msg_abc", now - 360, BODY), BODY),
            ("a future timestamp", SECRET, sign(SECRET, "msg_abc", now + 360, BODY), BODY),
            ("no signature", SECRET, {k: v for k, v in h.items() if k != "webhook-signature"}, BODY),
            ("a v2 signature", SECRET, {**h, "webhook-signature": h["webhook-signature"].replace("v1,", "v2,")}, BODY),
            ("a timestamp that is not a number", SECRET, {**h, "webhook-timestamp": "1e9"}, BODY),
        ]:
            with self.subTest(why):
                with self.assertRaises(WebhookVerificationError):
                    verify_webhook(secret, headers, body)

    def test_tolerance(self):
        now = int(time.time())
        old = sign(SECRET, "msg_abc", now - 240, BODY)
        verify_webhook(SECRET, old, BODY)  # 4 minutes: within the default 5
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(SECRET, old, BODY, tolerance=60)
        verify_webhook(SECRET, old, BODY, now=now - 240)

    def test_bad_secret_is_a_value_error(self):
        h = sign(SECRET, "msg_abc", int(time.time()), BODY)
        for bad in ["whsec_not base64!", "whsec_", []]:
            with self.subTest(bad):
                with self.assertRaises(ValueError):
                    verify_webhook(bad, h, BODY)


if __name__ == "__main__":
    unittest.main()
