// The client library's errors, sorted into what the link says about them. nats.js v3 reports a subject
// nobody keeps as JetStreamNotEnabled ("no responders" underneath), and a refused publish or subscribe as a
// PermissionViolationError, or as a RequestError carrying its message when it refused a request.
import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { errors } from "@nats-io/transport-node";
import { type Membership, Report } from "../vocabulary/index.ts";

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

/**
 * The server no longer takes this user's credentials: a password refused, a user revoked or expired. Not an
 * authentication timeout, which is a slow link. For a node's own user that means it was removed from its mesh
 * (or its credentials replaced by a reissue); for an enrolling user, that its code is spent or was never valid.
 */
export function isCredentialRefused(e: unknown): boolean {
  if (e instanceof errors.UserAuthenticationExpiredError) return true;
  const said = messageOf(e);
  if (/authentication timeout/i.test(said)) return false;
  return e instanceof errors.AuthorizationError || /authorization violation|revoked/i.test(said);
}

/**
 * Why the server refused `user` at `server`, in the link's words (never the library's, never a secret). A node's
 * own user refused means it was removed from its mesh, or its credentials replaced; an enrolling user's, that the
 * code is spent or withdrawn (the enrolment says so itself).
 */
export function credentialRefusal(server: string, user: string): string {
  if (user.startsWith("enrol.")) return credentialsRefused(server, user);
  return `${credentialsRefused(server, user)}: this node was removed from its mesh, or its credentials were replaced (\`mesh-host mesh node reissue NAME\` on the mesh, then \`mesh-host enrol --replace\` here)`;
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

/** Why binding the node's consumer failed, in the link's words, and whether waiting could cure it. */
export function bindFailure(
  e: unknown,
  membership: Membership,
): { kind: "missing" | "refused" | "unreachable"; reason: string } {
  const { stream, consumer, user } = membership;
  if (isConsumerNotFound(e)) return { kind: "missing", reason: missingConsumer(membership) };
  if (isStreamNotFound(e))
    return { kind: "missing", reason: `stream ${stream} does not exist on this bus: the mesh creates it` };
  if (isPermissionViolation(e))
    return {
      kind: "refused",
      reason: `the server refused ${user} the consumer info of ${stream}/${consumer}: ${messageOf(e)}`,
    };
  if (isJetStreamDisabled(e))
    return {
      kind: "refused",
      reason: `JetStream is not enabled for ${user}'s account: the mesh's account must have it`,
    };
  const kind = isClosed(e) || isTimeout(e) ? "unreachable" : "refused";
  return { kind, reason: `binding ${stream}/${consumer} failed: ${messageOf(e)}` };
}

/** The consumer the mesh makes at enrolment is not there: the mesh's to answer, never quietly created. */
export function missingConsumer({ stream, consumer }: Membership): string {
  return `consumer ${consumer} on ${stream} does not exist: the mesh creates it at enrolment`;
}

/** A socket's errno, said: "ECONNREFUSED" alone reached the node's log and the enrolling user. */
const REACH_WORDS: Record<string, string> = {
  ECONNREFUSED: "nothing listens there (connection refused)",
  ECONNRESET: "the connection was cut (reset by the other end)",
  EHOSTUNREACH: "no route to that host (host unreachable)",
  ENETUNREACH: "no route to that network (network unreachable)",
  ETIMEDOUT: "it did not answer (timed out)",
  ENOTFOUND: "the name does not resolve (not found)",
  EAI_AGAIN: "the name could not be looked up now (temporary failure)",
  EPIPE: "the connection was closed while writing (broken pipe)",
  EACCES: "this machine does not allow the connection (permission denied)",
};

/** Why a connection to the bus failed, in words, the errno after them for a search; never the bare code. */
export function reachWords(e: unknown): string {
  const err = e as Failure;
  const code = typeof err?.code === "string" ? err.code : undefined;
  if (code && REACH_WORDS[code]) return REACH_WORDS[code];
  if (code && /^E[A-Z_]+$/.test(code)) return `the connection failed (${code})`;
  return messageOf(e).split("\n")[0] ?? "the connection failed";
}

/** The bus refused a user's credentials: said without nats' "(Authorization Violation)". */
export function credentialsRefused(server: string, user: string): string {
  return `authentication error: ${server} refused ${user}'s credentials`;
}

/** Why a report cannot be said as it is (malformed, or another node's), or null. */
export function reportProblem(report: Report, node: string): string | null {
  const parsed = Report.safeParse(report);
  if (!parsed.success) return `the report is malformed: ${firstIssue(parsed.error)}`;
  if (parsed.data.node !== node) return `the report is for node ${parsed.data.node}, not ${node}`;
  return null;
}

/** A schema's first complaint, as a path and a message. */
export function firstIssue(error: { issues: { path: PropertyKey[]; message: string }[] }): string {
  const issue = error.issues[0];
  return issue ? `${issue.path.map(String).join(".") || "value"} ${issue.message}` : "invalid";
}
