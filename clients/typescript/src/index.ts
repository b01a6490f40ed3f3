// @timerq/client: a client for timerq's HTTP API, and verifyWebhook for
// the deliveries timerq signs. README.md shows both.
export { STALE_EPOCH, StaleEpochError, Timerq, TimerqError, payloadText } from "./client.js";
export type {
  CancelFilter,
  CancelJob,
  EpochBumped,
  ListQuery,
  NewTimer,
  OwnerState,
  Problem,
  Reschedule,
  Timer,
  TimerPage,
  TimerState,
  TimerqOptions,
  WaitOptions,
} from "./client.js";
export { verifyWebhook, WebhookVerificationError, WEBHOOK_TOLERANCE_SECONDS } from "./webhook.js";
export type { VerifiedWebhook, VerifyWebhookOptions, WebhookHeaders } from "./webhook.js";
/** The types generated from api/openapi.json: every path, operation and schema of the API. */
export type { components, operations, paths } from "../gen/timerq.js";

/** version is this package's version, as package.json has it. */
export const version = "0.2.0";
