// Where `enrol` reads its code (protocol.md, "Enrolment"): standard input or `--code-file F`, so the one-time
// token never stands in argv, which every local user reads in /proc/<pid>/cmdline and with it could take the
// answer. A code (or a --token) on the command line still works, said on stderr. The code is never echoed.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { MAX_CODE_CHARS } from "../../defaults.ts";
import { faultLine } from "../../faults.ts";
import {
  decodeCode,
  type EnrolmentCode,
  EnrolmentCodeV1,
  EnrolmentCodeV2,
  issueWords,
} from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import type { Context } from "../context.ts";

export const ARGV_WARNING =
  "warning: the enrolment token was given on the command line, where every local user can read it " +
  "(/proc/<pid>/cmdline) and take the mesh's answer with it; give the code on standard input or with --code-file";

/** The code's parts, from stdin, a file, argv or the per-part flags, refused naming the part that is wrong. */
export async function approachOf(ctx: Context): Promise<EnrolmentCode> {
  const [given, ...extra] = ctx.args.positionals;
  if (extra.length)
    throw new UsageError("enrol takes one code, better on standard input (see `mesh-host help enrol`)");
  const { node, server, fingerprint, token, codeFile } = ctx.args;
  const byParts = node !== undefined || server.length > 0 || fingerprint !== undefined || token !== undefined;
  if ([given !== undefined, codeFile !== undefined, byParts].filter(Boolean).length > 1)
    throw new UsageError(
      "enrol takes the code one way: on standard input, --code-file F, or the per-part flags (see `mesh-host help enrol`)",
    );
  if (byParts) {
    // every other part refused first, before waiting on standard input for the token
    fromParts(ctx, token ?? "the token, read next");
    if (token !== undefined) warnArgv();
    return fromParts(ctx, token ?? (await readStdin("the token")));
  }
  const text =
    given ?? (codeFile !== undefined ? readCodeFile(codeFile) : await readStdin("the enrolment code"));
  const decoded = decodeCode(text);
  // the reason names the code's part already ("enrolment code prefix: …"): said once, not twice
  if (!decoded.ok) throw new UsageError(decoded.reason);
  // said once the code is taken: a refusal stays one line
  if (given !== undefined) warnArgv();
  return decoded.value;
}

function warnArgv(): void {
  process.stderr.write(`mesh-host: ${ARGV_WARNING}\n`);
}

/**
 * The token part as given: a mesh made with keys gives its code's enrolling credential, the user JWT and its seed
 * (separated by white space, or a NATS credentials file's body as it is); a mesh made before gives a password.
 */
function credentialOf(token: string): { jwt: string; seed: string } | { token: string } {
  const jwt = token.match(/(?:^|\s)(eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)(?=\s|$)/)?.[1];
  const seed = token.match(/(?:^|\s)(SU[A-Z2-7]{56})(?=\s|$)/)?.[1];
  return jwt !== undefined && seed !== undefined ? { jwt, seed } : { token };
}

function fromParts(ctx: Context, token: string): EnrolmentCode {
  const { node, server, fingerprint } = ctx.args;
  const credential = credentialOf(token);
  // the credential's form says which code this is: that form's parts are named, never a union's
  const schema = "jwt" in credential ? EnrolmentCodeV2 : EnrolmentCodeV1;
  const parsed = schema.safeParse({ node, servers: server, fingerprint, transport: "nats", ...credential });
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = String(issue.path[0] ?? "code");
  const flag = field === "servers" ? "server" : field === "jwt" || field === "seed" ? "token" : field;
  const given = { node, server: server.length ? server : undefined, fingerprint, token }[flag];
  // the token's own words are never said back: it is a password
  const why = given === undefined ? "is missing" : flag === "token" ? "is not valid" : issueWords(issue);
  throw new UsageError(`enrol --${flag} ${why} (see \`mesh-host help enrol\`)`);
}

/** The code in F, surrounding white space not part of it; a reason names the file, never its content. */
function readCodeFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new UsageError(`--code-file: ${faultLine(e, "read") ?? `cannot read ${path}`}`);
  }
  if (text.length > MAX_CODE_CHARS)
    throw new UsageError(`--code-file ${path} is too long to be an enrolment code`);
  return text.trim();
}

/**
 * One pasted line from a terminal, or all of a pipe, trimmed. Nothing is echoed back or logged; an empty input
 * is refused saying how to give it.
 */
async function readStdin(what: string): Promise<string> {
  const text = process.stdin.isTTY ? await pastedLine(what) : await piped();
  const trimmed = text.trim();
  if (!trimmed)
    throw new UsageError(
      `enrol reads ${what} from standard input (or --code-file F), and it was empty (see \`mesh-host help enrol\`)`,
    );
  return trimmed;
}

async function pastedLine(what: string): Promise<string> {
  process.stderr.write(`paste ${what}, then Enter: `);
  const lines = createInterface({ input: process.stdin, terminal: false });
  try {
    for await (const line of lines) return line;
    return "";
  } finally {
    lines.close();
  }
}

async function piped(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).byteLength;
    if (size > MAX_CODE_CHARS * 4) throw new UsageError("standard input is too long to be an enrolment code");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
