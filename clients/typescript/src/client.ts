import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "../gen/timerq.js";

/** A timer's record, as get, list, wait and the writes return it. */
export type Timer = components["schemas"]["Timer"];
/** A timer to create: give `due_at` or `in`. */
export type NewTimer = components["schemas"]["NewTimer"];
/** A timer's state: scheduled, fired or cancelled. */
export type TimerState = components["schemas"]["State"];
/** The new due time of a reschedule: give `due_at` or `in`. */
export type Reschedule = components["schemas"]["Reschedule"];
/** One page of a list, and the cursor of the next. */
export type TimerPage = components["schemas"]["TimerPage"];
/** An RFC 9457 problem: the body of every error the API answers. */
export type Problem = components["schemas"]["Problem"];
/** The filters of a list: state, due_from, due_to, owner, label (["KEY=VALUE", ...], all must match), limit, cursor. */
export type ListQuery = NonNullable<paths["/v1/namespaces/{ns}/timers"]["get"]["parameters"]["query"]>;
/** Which timers a bulk cancel selects: id_prefix, owner, labels (every one given must match), epoch_below (with owner). */
export type CancelFilter = components["schemas"]["CancelFilter"];
/** A bulk cancel job: its filter, state (running, done, failed) and counts. */
export type CancelJob = components["schemas"]["CancelJob"];
/** Where an owner stands: its fencing epoch, how many of its timers are scheduled, and the earliest due time among them. */
export type OwnerState = components["schemas"]["OwnerState"];
/** An owner's new epoch, and the bulk cancel of its older timers when cancelOlder asked for one. */
export type EpochBumped = components["schemas"]["EpochBumped"];

/** The problem type of a create under an owner epoch that is no longer the owner's current one. */
export const STALE_EPOCH = "urn:timerq:problem:stale-epoch";

/**
 * TimerqError is a call the API refused or failed: its status, and the
 * problem it answered (`type` is `urn:timerq:problem:<slug>`, which never
 * changes; docs/api.md lists them; `field` names a refused field as a JSON
 * pointer).
 */
export class TimerqError extends Error {
  readonly status: number;
  readonly problem: Problem;

  constructor(status: number, problem: Problem) {
    super(`timerq: ${status} ${problem.type}${problem.detail ? `: ${problem.detail}` : ""}`);
    this.name = "TimerqError";
    this.status = status;
    this.problem = problem;
  }

  /** The problem's type, urn:timerq:problem:<slug>. */
  get type(): string {
    return this.problem.type;
  }

  /** The refused request field, as a JSON pointer, if the problem names one. */
  get field(): string | undefined {
    return this.problem.field;
  }
}

/**
 * StaleEpochError is the TimerqError (409, urn:timerq:problem:stale-epoch)
 * of a schedule whose `epoch` is no longer its owner's: another executor
 * bumped the epoch and took the owner over. Nothing was written; stop
 * acting for the owner (or bump again to take it back).
 */
export class StaleEpochError extends TimerqError {
  constructor(status: number, problem: Problem) {
    super(status, problem);
    this.name = "StaleEpochError";
  }
}

/** Options of a Timerq client. */
export interface TimerqOptions {
  /** The API's base URL, e.g. http://localhost:8080 (timerworker --api-addr). */
  baseUrl: string;
  /** The namespace every call of this client is for. */
  namespace: string;
  /** A bearer token (`timerctl api-token create`); none for a loopback API without a tokens file. */
  token?: string;
  /** A fetch to call instead of the global one. */
  fetch?: typeof globalThis.fetch;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

/** The options of wait. */
export interface WaitOptions {
  /** How long the server holds the request, in Go's syntax ("30s"); the server's default when omitted. */
  timeout?: string;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/**
 * Timerq is a client for one namespace of timerq's HTTP API.
 *
 * Its methods cover the common calls on timers and throw TimerqError for
 * every answer that is not a success. Every other route of the API
 * (namespaces, batch writes, debounce, schedules, endpoints, pull
 * consumers, flow policies, quotas, the fire stream) is on `raw`, an
 * openapi-fetch client typed from api/openapi.json: `raw.GET(path, ...)`
 * returns `{ data, error, response }` and checks the path, parameters and
 * body against the contract when the caller compiles.
 *
 * Owners, labels and the fencing epoch are fields of NewTimer and Timer
 * (`owner`, `labels`, `epoch`, and the fire deadline `fire_within_ms` or
 * `fire_by`); list filters by `owner` and `label`, cancelMatching cancels
 * by owner or labels, getOwner reads an owner and bumpEpoch fences it. A
 * schedule under a stale epoch throws StaleEpochError.
 */
export class Timerq {
  /** The openapi-fetch client of every route, typed from api/openapi.json. */
  readonly raw: Client<paths>;
  /** The namespace of this client's calls. */
  readonly namespace: string;

  constructor(options: TimerqOptions) {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers["Authorization"] = `Bearer ${options.token}`;
    this.raw = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.namespace = options.namespace;
  }

  /**
   * schedule creates a timer, or returns the one with its ID as it is:
   * create is idempotent by ID, and `created` says which happened. With
   * `owner` and `epoch`, a stale epoch throws StaleEpochError and writes
   * nothing.
   */
  async schedule(timer: NewTimer): Promise<Timer> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/timers", { params: { path: { ns: this.namespace } }, body: timer }));
  }

  /**
   * scheduleBatch creates up to the API's batch limit of timers in one
   * call: all of them, or none if one is refused (the error's field names
   * it, /timers/<i>/...). The results are in the order given.
   */
  async scheduleBatch(timers: NewTimer[]): Promise<Timer[]> {
    const res = unwrap(
      await this.raw.POST("/v1/namespaces/{ns}/timers/batch", { params: { path: { ns: this.namespace } }, body: { timers } }),
    );
    return res.timers;
  }

  /** get returns a timer; a timer that does not exist is a TimerqError with status 404. */
  async get(id: string): Promise<Timer> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/timers/{id}", { params: this.timer(id) }));
  }

  /**
   * cancel cancels a scheduled timer and returns it. Cancelling twice is
   * no change; a timer that already fired is a TimerqError 409
   * (urn:timerq:problem:already-fired).
   */
  async cancel(id: string): Promise<Timer> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/timers/{id}/cancel", { params: this.timer(id) }));
  }

  /** reschedule moves a scheduled timer to a new due time. */
  async reschedule(id: string, to: Reschedule): Promise<Timer> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/timers/{id}/reschedule", { params: this.timer(id), body: to }));
  }

  /** fire makes a scheduled timer due now; a worker fires it. */
  async fire(id: string): Promise<Timer> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/timers/{id}/fire", { params: this.timer(id) }));
  }

  /**
   * wait is a long poll: it answers the timer once it fired or was
   * cancelled, or as it is when the timeout passed, still "scheduled":
   * then ask again.
   */
  async wait(id: string, options: WaitOptions = {}): Promise<Timer> {
    return unwrap(
      await this.raw.GET("/v1/namespaces/{ns}/timers/{id}/wait", {
        params: { ...this.timer(id), query: options.timeout ? { timeout: options.timeout } : {} },
        ...(options.signal ? { signal: options.signal } : {}),
      }),
    );
  }

  /** listPage returns one page of timers, in due order; pass its next_cursor as cursor for the next. */
  async listPage(query: ListQuery = {}): Promise<TimerPage> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/timers", { params: { path: { ns: this.namespace }, query } }));
  }

  /** list yields every timer that matches, in due order, following the cursor page by page. */
  async *list(query: Omit<ListQuery, "cursor"> = {}): AsyncGenerator<Timer, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listPage({ ...query, ...(cursor ? { cursor } : {}) });
      yield* page.timers;
      cursor = page.next_cursor || undefined;
    } while (cursor);
  }

  /**
   * cancelMatching cancels every scheduled timer the filter selects (an ID
   * prefix, an owner, labels: each one given must match), on every shard.
   * The job answered is `done` when it fitted in the call, or `running`
   * in the workers: follow it with cancelJob(job.id).
   */
  async cancelMatching(filter: CancelFilter): Promise<CancelJob> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/timers/cancel", { params: { path: { ns: this.namespace } }, body: filter }));
  }

  /** cancelJob reads a bulk cancel job by its ID: its state and counts so far. */
  async cancelJob(id: string): Promise<CancelJob> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/cancel-jobs/{id}", { params: this.timer(id) }));
  }

  /**
   * getOwner reads an owner: its fencing epoch, how many of its timers are
   * scheduled, and the earliest due time among them (`next_wake_at`, null
   * when none is). An owner nothing named has epoch 0 and none scheduled.
   */
  async getOwner(owner: string): Promise<OwnerState> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/owners/{owner}", { params: { path: { ns: this.namespace, owner } } }));
  }

  /**
   * bumpEpoch raises an owner's fencing epoch by one and returns it: the
   * executor taking the owner over schedules with `epoch` set to it, and
   * ignores fires whose epoch is lower. With `cancelOlder` it also cancels
   * the owner's scheduled timers of older epochs, as a bulk cancel
   * (`cancel_job`).
   */
  async bumpEpoch(owner: string, options: { cancelOlder?: boolean } = {}): Promise<EpochBumped> {
    return unwrap(
      await this.raw.POST("/v1/namespaces/{ns}/owners/{owner}/epoch", {
        params: { path: { ns: this.namespace, owner } },
        body: options.cancelOlder ? { cancel_older: true } : {},
      }),
    );
  }

  private timer(id: string): { path: { ns: string; id: string } } {
    return { path: { ns: this.namespace, id } };
  }
}

/** payloadText decodes a timer's (or a fire's) base64 payload as UTF-8. */
export function payloadText(t: { payload: string }): string {
  return Buffer.from(t.payload, "base64").toString("utf8");
}

/**
 * unwrap returns an openapi-fetch result's data, or throws TimerqError
 * with the problem answered (or one made up from the status, for an answer
 * that is not a problem: a proxy's 502, say).
 */
function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.error === undefined && r.data !== undefined) return r.data;
  const e = r.error;
  const problem: Problem =
    e && typeof e === "object" && typeof (e as Problem).type === "string"
      ? (e as Problem)
      : {
          type: "about:blank",
          title: r.response.statusText || `HTTP ${r.response.status}`,
          status: r.response.status,
          ...(typeof e === "string" && e ? { detail: e.slice(0, 512) } : {}),
        };
  throw problem.type === STALE_EPOCH ? new StaleEpochError(r.response.status, problem) : new TimerqError(r.response.status, problem);
}
