// The enrolment code (cli.md): encoded and decoded as another implementation would, and refused naming the part
// that is wrong, never the token. The architecture's rules are test/architecture.test.ts.
import { describe, expect, it } from "vitest";
import { MAX_CODE_CHARS } from "../src/defaults.ts";
import type { EnrolmentCode } from "../src/vocabulary/index.ts";
import { CODE_PREFIX, decodeCode, encodeCode } from "../src/vocabulary/index.ts";

const TOKEN = "tok_S3CRET-9f2c1e";

const parts: EnrolmentCode = {
  node: "web-1",
  servers: ["nats://10.0.0.1:4222", "nats://bus.example.net:4222"],
  fingerprint: "a".repeat(64),
  transport: "nats",
  token: TOKEN,
};

/** A code around any JSON value, bypassing encodeCode's types. */
function codeOf(json: unknown): string {
  return CODE_PREFIX + Buffer.from(JSON.stringify(json), "utf8").toString("base64url");
}

function reasonOf(text: string): string {
  const decoded = decodeCode(text);
  if (decoded.ok) throw new Error("expected a refusal");
  expect(decoded.reason).not.toContain("\n");
  expect(decoded.reason).not.toContain(TOKEN);
  return decoded.reason;
}

describe("encodeCode and decodeCode", () => {
  it("round-trip an enrolment code", () => {
    const code = encodeCode(parts);
    expect(code.startsWith("mesh1.")).toBe(true);
    expect(code.slice(6)).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCode(code)).toEqual({ ok: true, value: parts });
  });

  it("encodes the JSON of cli.md, keys in its order, so another implementation reads it", () => {
    const json = Buffer.from(encodeCode(parts).slice(6), "base64url").toString("utf8");
    expect(json).toBe(
      `{"node":"web-1","servers":["nats://10.0.0.1:4222","nats://bus.example.net:4222"],"fingerprint":"${"a".repeat(64)}","transport":"nats","token":"${TOKEN}"}`,
    );
  });

  it("takes a code pasted with spaces and a newline around it", () => {
    expect(decodeCode(`  ${encodeCode(parts)}\n`)).toEqual({ ok: true, value: parts });
  });

  it("reads a token with characters JSON escapes and non-ASCII", () => {
    const odd = { ...parts, token: 'p"a\\s/s\u00e9\u2028' };
    expect(decodeCode(encodeCode(odd))).toEqual({ ok: true, value: odd });
  });
});

describe("a malformed code is refused naming the part, never the token", () => {
  const good = encodeCode(parts);
  const payload = good.slice(CODE_PREFIX.length);

  it.each([
    ["no prefix", payload, "prefix"],
    ["another version's prefix", `mesh2.${payload}`, "prefix"],
    ["an upper-case prefix", `MESH1.${payload}`, "prefix"],
    ["the raw JSON pasted", JSON.stringify(parts), "prefix"],
    ["an empty string", "", "prefix"],
  ])("prefix: %s", (_, text, part) => {
    expect(reasonOf(text)).toBe(`enrolment code ${part}: must start with "mesh1."`);
  });

  it.each([
    ["nothing after the prefix", CODE_PREFIX],
    ["standard base64 characters", CODE_PREFIX + Buffer.from(JSON.stringify(parts)).toString("base64")],
    ["padding", `${good}==`],
    ["a space inside", `${good.slice(0, 20)} ${good.slice(20)}`],
    ["a character cut off", good.slice(0, -1)],
  ])("base64: %s", (_, text) => {
    const reason = reasonOf(text);
    // a base64 string one character short can still decode; then it is the JSON that breaks
    expect(reason).toMatch(/^enrolment code (base64|JSON): /);
  });

  it("base64: padding and standard alphabet are named as base64", () => {
    expect(reasonOf(`${good}=`)).toBe("enrolment code base64: must be base64url without padding");
    expect(reasonOf(`${CODE_PREFIX}ab+/`)).toBe("enrolment code base64: must be base64url without padding");
  });

  it.each([
    ["not JSON", CODE_PREFIX + Buffer.from(`token=${TOKEN}`).toString("base64url"), "is not UTF-8 JSON"],
    [
      "truncated JSON quoting the token",
      CODE_PREFIX + Buffer.from(`{"token":"${TOKEN}`).toString("base64url"),
      "is not UTF-8 JSON",
    ],
    [
      "not UTF-8",
      CODE_PREFIX + Buffer.from([0x7b, 0xff, 0xfe, 0x7d]).toString("base64url"),
      "is not UTF-8 JSON",
    ],
    ["an array", codeOf([parts]), "must be an object"],
    ["a string", codeOf(TOKEN), "must be an object"],
    ["null", codeOf(null), "must be an object"],
  ])("JSON: %s", (_, text, why) => {
    expect(reasonOf(text)).toBe(`enrolment code JSON: ${why}`);
  });

  it("JSON: an unknown field is named", () => {
    expect(reasonOf(codeOf({ ...parts, password: TOKEN }))).toBe(
      'enrolment code JSON: unknown field "password"',
    );
  });

  it.each([
    ["missing", { ...parts, node: undefined }, "is missing"],
    ["upper case", { ...parts, node: "Web-1" }, "must match"],
    ["a path", { ...parts, node: "../etc" }, "must match"],
    ["a number", { ...parts, node: 7 }, "must be a string"],
  ])("node: %s", (_, json, why) => {
    expect(reasonOf(codeOf(json))).toContain(`enrolment code node: ${why}`);
  });

  it.each([
    ["missing", { ...parts, servers: undefined }, "enrolment code servers: is missing"],
    ["empty", { ...parts, servers: [] }, "enrolment code servers: must not be empty"],
    [
      "a string, not a list",
      { ...parts, servers: "nats://10.0.0.1:4222" },
      "enrolment code servers: must be a list",
    ],
    [
      "a URL without a port",
      { ...parts, servers: ["nats://10.0.0.1"] },
      "enrolment code servers.0: must be nats://host:port",
    ],
    [
      "an http URL",
      { ...parts, servers: ["nats://a:1", "https://a:443"] },
      "enrolment code servers.1: must be nats://host:port",
    ],
  ])("servers: %s", (_, json, reason) => {
    expect(reasonOf(codeOf(json))).toBe(reason);
  });

  it.each([
    ["missing", { ...parts, fingerprint: undefined }, "is missing"],
    ["upper case", { ...parts, fingerprint: "A".repeat(64) }, "must be a SHA-256 hex fingerprint"],
    [
      "with colons",
      { ...parts, fingerprint: Array(32).fill("ab").join(":") },
      "must be a SHA-256 hex fingerprint",
    ],
    ["SHA-1 length", { ...parts, fingerprint: "a".repeat(40) }, "must be a SHA-256 hex fingerprint"],
  ])("fingerprint: %s", (_, json, why) => {
    expect(reasonOf(codeOf(json))).toContain(`enrolment code fingerprint: ${why}`);
  });

  it.each([
    ["missing", { ...parts, transport: undefined }, "is missing"],
    ["another bus", { ...parts, transport: "mqtt" }, 'must be "nats"'],
    ["upper case", { ...parts, transport: "NATS" }, 'must be "nats"'],
  ])("transport: %s", (_, json, why) => {
    expect(reasonOf(codeOf(json))).toBe(`enrolment code transport: ${why}`);
  });

  it("credential: missing (no token, no jwt and seed) is said as the current form's parts", () => {
    expect(reasonOf(codeOf({ ...parts, token: undefined }))).toBe(
      "enrolment code jwt: is missing; enrolment code seed: is missing",
    );
  });

  it.each([
    ["empty", { ...parts, token: "" }, "must not be empty"],
    ["a number", { ...parts, token: 12345 }, "must be a string"],
  ])("token: %s", (_, json, why) => {
    expect(reasonOf(codeOf(json))).toBe(`enrolment code token: ${why}`);
  });

  it("names every wrong part at once, the token in none of them", () => {
    const reason = reasonOf(codeOf({ ...parts, node: "", fingerprint: "x", transport: "tcp" }));
    expect(reason).toMatch(
      /enrolment code node: .*; enrolment code fingerprint: .*; enrolment code transport: /,
    );
  });

  it("says only the part when a reason would otherwise hold the token", () => {
    // the node-name rule's reason says "takes no dot"; with that as the token too, the reason must not carry it
    const decoded = decodeCode(codeOf({ ...parts, node: "a.b", token: "takes no dot" }));
    expect(decoded).toEqual({ ok: false, reason: "enrolment code node: not valid" });
  });

  it("refuses a code far longer than any real one, without reading it", () => {
    const reason = reasonOf(CODE_PREFIX + "A".repeat(MAX_CODE_CHARS));
    expect(reason).toMatch(/^enrolment code length: is \d+ characters, more than the \d+ allowed$/);
  });

  it("refuses a non-string without throwing", () => {
    expect(reasonOf(undefined as unknown as string)).toMatch(/^enrolment code prefix: /);
  });
});
