// The worker the live tests run against, from the environment the Go test
// (go test ./clients/) sets; without TIMERQ_API those tests skip.
import { test } from "node:test";

const api = process.env["TIMERQ_API"] ?? "";

export const live = {
  base: api,
  token: process.env["TIMERQ_TOKEN"] ?? "",
  ns: process.env["TIMERQ_NS"] ?? "",
  shards: Number(process.env["TIMERQ_SHARDS"] ?? "1"),
};

const why = "TIMERQ_API is not set: run these through go test ./clients/, which starts Redis and a timerworker";

/** liveTest is node:test's test, skipped without a worker to call. */
export function liveTest(name: string, fn: () => Promise<void>): void {
  test(name, api ? {} : { skip: why }, fn);
}
