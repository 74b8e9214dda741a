// The enrolment code (cli.md): one pasteable string carrying where, which certificate, which bus, and the token.
// `mesh1.` + base64url (no padding) of the UTF-8 JSON {node, servers, fingerprint, transport, token}.
// A refusal names the part that is wrong and never quotes the code: the token is a password.
import type { z } from "zod";
import { MAX_CODE_CHARS } from "../defaults.ts";
import { oneLine } from "./refusal.ts";
import { EnrolmentCode } from "./wire.ts";

export const CODE_PREFIX = "mesh1.";

export type DecodedCode = { ok: true; value: EnrolmentCode } | { ok: false; reason: string };

const PARTS = ["node", "servers", "fingerprint", "transport", "token"] as const;

export function encodeCode(parts: EnrolmentCode): string {
  const { node, servers, fingerprint, transport, token } = parts;
  const json = JSON.stringify({ node, servers, fingerprint, transport, token });
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
  const parsed = EnrolmentCode.safeParse(json);
  if (parsed.success) return { ok: true, value: parsed.data };
  const reason = parsed.error.issues.map((issue) => issueLine(issue, json)).join("; ");
  return { ok: false, reason: oneLine(withoutToken(reason, tokenOf(json))) };
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

function tokenOf(json: object): string | null {
  const token = (json as { token?: unknown }).token;
  return typeof token === "string" && token.length > 0 ? token : null;
}

// Belt and braces: no message here quotes a value, but should one ever hold the token, only the parts are said.
function withoutToken(reason: string, token: string | null): string {
  if (token === null || !reason.includes(token)) return reason;
  const parts = PARTS.filter((p) => reason.includes(`code ${p}`));
  return `enrolment code ${parts.join(", ") || "JSON"}: not valid`;
}
