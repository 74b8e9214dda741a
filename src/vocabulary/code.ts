// The enrolment code (cli.md): one pasteable string carrying where, which certificate, which bus, and the
// enrolling credential. `mesh1.` + base64url (no padding) of the UTF-8 JSON {node, servers, fingerprint,
// transport, jwt, seed} (v2: the enrolling user's JWT and its key's seed) or {…, token} (v1: a mesh made before).
// A refusal names the part that is wrong and never quotes the code: the seed and the token are secrets.
import type { z } from "zod";
import { MAX_CODE_CHARS } from "../defaults.ts";
import { oneLine } from "./refusal.ts";
import { type EnrolmentCode, EnrolmentCodeV1, EnrolmentCodeV2 } from "./wire.ts";

export const CODE_PREFIX = "mesh1.";

export type DecodedCode = { ok: true; value: EnrolmentCode } | { ok: false; reason: string };

const PARTS = ["node", "servers", "fingerprint", "transport", "jwt", "seed", "token"] as const;

export function encodeCode(parts: EnrolmentCode): string {
  const { node, servers, fingerprint, transport } = parts;
  const credential = "token" in parts ? { token: parts.token } : { jwt: parts.jwt, seed: parts.seed };
  const json = JSON.stringify({ node, servers, fingerprint, transport, ...credential });
  return CODE_PREFIX + Buffer.from(json, "utf8").toString("base64url");
}

export function decodeCode(text: string): DecodedCode {
  const refuse = (part: string, why: string): DecodedCode => ({
    ok: false,
    reason: `enrolment code ${part}: ${why}`,
  });
  if (typeof text !== "string") return refuse("prefix", `must be a string starting with "${CODE_PREFIX}"`);
  // a pasted code often brings a newline or spaces with it
  const code = text.trim();
  if (code.length > MAX_CODE_CHARS)
    return refuse("length", `is ${code.length} characters, more than the ${MAX_CODE_CHARS} allowed`);
  if (!code.startsWith(CODE_PREFIX)) return refuse("prefix", `must start with "${CODE_PREFIX}"`);
  const bytes = base64urlBytes(code.slice(CODE_PREFIX.length));
  if (!bytes) return refuse("base64", "must be base64url without padding");
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    // JSON.parse's message quotes the text it choked on, and the text holds the token: say nothing of it
    return refuse("JSON", "is not UTF-8 JSON");
  }
  if (typeof json !== "object" || json === null || Array.isArray(json))
    return refuse("JSON", "must be an object");
  // the credential's field says which form it is, so a refusal names that form's parts, never a union's
  const schema = "token" in json ? EnrolmentCodeV1 : EnrolmentCodeV2;
  const parsed = schema.safeParse(json);
  if (parsed.success) return { ok: true, value: parsed.data };
  const reason = parsed.error.issues.map((issue) => issueLine(issue, json)).join("; ");
  return { ok: false, reason: oneLine(withoutSecrets(reason, secretsOf(json))) };
}

/** Strict base64url: one spelling per value, no padding, nothing Node's lenient decoder would skip. */
function base64urlBytes(text: string): Buffer | null {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return null;
  const bytes = Buffer.from(text, "base64url");
  return bytes.toString("base64url") === text ? bytes : null;
}

function issueLine(issue: z.core.$ZodIssue, json: object): string {
  if (issue.code === "unrecognized_keys")
    return `enrolment code JSON: unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}`;
  const field = issue.path.map(String).join(".") || "JSON";
  const missing = issue.path.length === 1 && (json as Record<string, unknown>)[field] === undefined;
  return `enrolment code ${field}: ${missing ? "is missing" : problemOf(issue)}`;
}

function problemOf(issue: z.core.$ZodIssue): string {
  if (issue.code === "invalid_type")
    return `must be ${issue.expected === "array" ? "a list" : `a ${issue.expected}`}`;
  if (issue.code === "too_small") return "must not be empty";
  if (issue.code === "invalid_value")
    return `must be ${issue.values.map((v) => JSON.stringify(v)).join(" or ")}`;
  return oneLine(issue.message);
}

function secretsOf(json: object): string[] {
  const { token, seed } = json as { token?: unknown; seed?: unknown };
  return [token, seed].filter((v): v is string => typeof v === "string" && v.length > 0);
}

// Belt and braces: no message here quotes a value, but should one ever hold a secret, only the parts are said.
function withoutSecrets(reason: string, secrets: string[]): string {
  if (!secrets.some((s) => reason.includes(s))) return reason;
  const parts = PARTS.filter((p) => reason.includes(`code ${p}`));
  return `enrolment code ${parts.join(", ") || "JSON"}: not valid`;
}
