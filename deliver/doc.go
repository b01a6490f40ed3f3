// Package deliver is timerq's push delivery engine: it sends a fire's
// payload to an HTTP endpoint as a signed POST, classifies the answer, and
// says when to retry or whether to dead-letter. It does not depend on how
// endpoints are stored; a program maps its endpoint records onto Endpoint.
// Like poller, it is public so that a program may embed a dispatcher:
// package deliver/dispatch runs one over a queue's fires. deliver itself
// imports nothing of timerq, so package queue may use its checks.
//
// # Requests
//
// Each attempt is a POST of the payload to the endpoint's URL, with the
// endpoint's headers and these (lower-case, as Standard Webhooks writes
// them):
//
//	webhook-id         MessageID(namespace, timer ID, due): the same on every attempt of one fire
//	webhook-timestamp  this attempt's time, Unix seconds
//	webhook-signature  "v1,<base64 HMAC-SHA256>" of "<id>.<timestamp>.<body>", one per active secret, space separated
//	timerq-timer-id    the timer's ID, percent-encoded as a URL path segment
//	timerq-due-at      the due time, RFC 3339 UTC with milliseconds (2026-12-04T21:00:00.000Z)
//	timerq-fired-at    when it fired, by the Redis server's clock, same form
//	timerq-attempt     the attempt number, from 1
//	traceparent        the W3C trace context of the span that scheduled the timer, when traced
//	timerq-owner       the timer's owner, percent-encoded as a URL path segment, when it has one
//	timerq-epoch       with timerq-owner: the owner's fencing epoch the timer was scheduled under
//
// Signatures follow Standard Webhooks (https://www.standardwebhooks.com/),
// so any of its reference libraries verifies them; deliver's tests check
// that with the npm package standardwebhooks, during a key rotation too.
// Secrets are "whsec_" and the base64 of 24 to 64 random bytes
// (ParseSecret, GenerateSecret); sign with the old and the new secret
// during a rotation, and receivers that know either accept the request.
//
// # Outcomes
//
// Decide is the retry policy as a pure function: 2xx is delivered; 429 and
// 503 are retried after their Retry-After; 408, 5xx, timeouts and
// connection errors are retried with exponentially growing, fully jittered
// backoff; 410 Gone and other 4xx are dead-lettered at once (other 4xx are
// retried under Policy.RetryClientErrors); a fire whose attempts or age
// run out is dead-lettered.
//
// # SSRF guard
//
// Guard refuses loopback, private, link-local, multicast, unspecified,
// CGNAT and cloud metadata addresses, checked on the address actually
// dialled, so DNS rebinding does not get past it; operators allow ranges
// and hosts explicitly. ValidateURL is the check to run when an endpoint
// is registered.
package deliver
