// The client library's errors, sorted into what the link says about them. nats.js v3 reports a subject
// nobody keeps as JetStreamNotEnabled ("no responders" underneath), and a refused publish or subscribe as a
// PermissionViolationError, or as a RequestError carrying its message when it refused a request.
import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { errors } from "@nats-io/transport-node";

type Failure = Error & { code?: unknown; cause?: unknown };

export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function isNoResponders(e: unknown): boolean {
  const err = e as Failure;
  if (err instanceof errors.NoRespondersError) return true;
  if (err?.name === "JetStreamNotEnabled") return true;
  if (err instanceof errors.RequestError && err.isNoResponders()) return true;
  return /no responders/i.test(messageOf(e));
}

export function isPermissionViolation(e: unknown): boolean {
  return e instanceof errors.PermissionViolationError || /Permissions Violation/.test(messageOf(e));
}

export function isTimeout(e: unknown): boolean {
  return e instanceof errors.TimeoutError || (e as Failure)?.name === "TimeoutError";
}

export function isClosed(e: unknown): boolean {
  return e instanceof errors.ClosedConnectionError || /connection closed/i.test(messageOf(e));
}

function apiCode(e: unknown): number | null {
  return e instanceof JetStreamApiError ? e.code : null;
}

export function isConsumerNotFound(e: unknown): boolean {
  return (
    apiCode(e) === JetStreamApiCodes.ConsumerNotFound || /consumer (not found|deleted)/i.test(messageOf(e))
  );
}

export function isStreamNotFound(e: unknown): boolean {
  return apiCode(e) === JetStreamApiCodes.StreamNotFound || /stream (not found|deleted)/i.test(messageOf(e));
}

export function isJetStreamDisabled(e: unknown): boolean {
  return apiCode(e) === JetStreamApiCodes.JetStreamNotEnabledForAccount || isNoResponders(e);
}
