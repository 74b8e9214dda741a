import { describe, expect, it } from "vitest";
import { archAppliers } from "../../src/appliers/arch/index.ts";
import { makeHost } from "../../src/hosts/index.ts";
import {
  nameProblem,
  parseDeclaration,
  parseDeclarationBody,
  pathProblem,
  refusalLine,
} from "../../src/vocabulary/index.ts";
import { decl } from "../support/offline.ts";

const file = (extra: Record<string, unknown> = {}) => ({
  id: "f",
  type: "file",
  path: "/etc/x",
  content: "x",
  ...extra,
});

function refusals(raw: unknown, host = makeHost("linux")) {
  const parsed = parseDeclaration(raw, host.support);
  if (parsed.ok) throw new Error("expected a refusal");
  return parsed.refusals;
}

describe("the one rule for names and paths", () => {
  it.each(["a", "web-1", "x.y_z", "0", "a".repeat(63)])("accepts the name %s", (n) =>
    expect(nameProblem(n)).toBeNull(),
  );
  it.each([".", "..", "", "A", "-a", "a/b", "a".repeat(64), "a b", "é"])("refuses the name %j", (n) =>
    expect(nameProblem(n)).not.toBeNull(),
  );
  it.each(["/etc/x", "/a/b.c/d", "/a..b"])("accepts the path %s", (p) => expect(pathProblem(p)).toBeNull());
  it.each(["etc/x", "/etc/../x", "/etc/./x", "//etc", "/etc//x", "/etc/", "/", "/a\0b", "/a/.."])(
    "refuses the path %j",
    (p) => expect(pathProblem(p)).not.toBeNull(),
  );
});

describe("a declaration on arrival", () => {
  it("accepts the portable floor", () => {
    const parsed = parseDeclaration(
      decl([
        { id: "d", type: "directory", path: "/srv" },
        file({ mode: "0640", owner: "root", group: 0 }),
        {
          id: "a",
          type: "action",
          run: ["true"],
          on: ["f"],
          creates: "/srv/done",
          timeout_s: 5,
          env: { A: "1" },
        },
      ]),
    );
    expect(parsed.ok).toBe(true);
  });

  it("takes: a boolean on a service, a package and a process, refused naming the field otherwise", () => {
    const arch = makeHost("arch", archAppliers());
    const svc = { id: "s", type: "service", unit: "a.service", takes: true };
    const pkg = { id: "p", type: "package", name: "a", version: "1.0-1", takes: false };
    const proc = { id: "q", type: "process", name: "q", exec: ["/bin/true"], takes: true };
    expect(parseDeclaration(decl([svc, pkg, proc], { mode: "adopted" }), arch.support).ok).toBe(true);
    expect(refusals(decl([{ ...svc, takes: "yes" }]), arch)).toEqual([
      expect.objectContaining({ id: "s", field: "takes" }),
    ]);
  });

  it('a secret is sealed (v1:…), or in a bundle "installer"; anything else is refused naming the secret', () => {
    const named = (value: string) =>
      decl([file({ content: undefined, secret: "pw" })], { secrets: { pw: value } });
    expect(parseDeclaration(named("installer")).ok).toBe(true);
    expect(parseDeclaration(named("v1:AAAA:BBBB:CCCC")).ok).toBe(true);
    expect(refusals(named("hunter2")).map(refusalLine)).toEqual([
      'declaration field "secrets.pw": must be a sealed value (v1:…) or "installer"',
    ]);
  });

  it("refuses an unknown field naming the resource and the field", () => {
    const [r] = refusals(decl([file({ colour: "red" })]));
    expect(r).toEqual({ id: "f", field: "colour", reason: "unknown field" });
    expect(refusalLine(r!)).toBe('resource "f", field "colour": unknown field');
  });

  it("refuses an unknown type, and a known type this host lacks with the host's reason", () => {
    expect(refusals(decl([{ id: "b", type: "banana" }]))[0]).toMatchObject({
      id: "b",
      field: "type",
      reason: 'unknown type "banana"',
    });
    expect(
      refusals(decl([{ id: "s", type: "service", unit: "x.service" }]), makeHost("android"))[0]!.reason,
    ).toContain("not on an Android host");
    expect(
      refusals(decl([{ id: "s", type: "service", unit: "x.service" }]), makeHost("linux"))[0]!.reason,
    ).toContain("no applier for this OS");
    expect(refusals(decl([{ id: "c", type: "container" }]), makeHost("android"))[0]!.reason).toContain(
      "not on an Android host",
    );
  });

  it.each([
    [file({ mode: "644x" }), "mode"],
    [file({ mode: "0999" }), "mode"],
    [file({ path: "relative" }), "path"],
    [file({ path: "/etc/../shadow" }), "path"],
    [file({ path: "/etc//x" }), "path"],
    [file({ path: "/etc/x\u0000" }), "path"],
    [file({ content: undefined }), "content"],
    [file({ content_b64: "eA==" }), "content"],
    [file({ id: ".." }), "id"],
    [file({ owner: "bad name!" }), "owner"],
    [{ id: "a", type: "action", run: [] }, "run"],
    [{ id: "a", type: "action", run: ["x"], timeout_s: 0 }, "timeout_s"],
    [{ id: "a", type: "action", run: ["x"], env: { "A-B": "1" } }, "env.A-B"],
  ])("refuses %j naming the field %s", (resource, field) => {
    const found = refusals(decl([resource]));
    expect(found.map((r) => r.field)).toContain(field);
  });

  it("refuses a repeated id and a repeated path", () => {
    expect(refusals(decl([file(), file()])).map((r) => r.field)).toContain("id");
    expect(refusals(decl([file(), file({ id: "g" })]))[0]).toMatchObject({ id: "g", field: "path" });
  });

  it("refuses an `on` naming an id that is not declared", () => {
    expect(refusals(decl([{ id: "a", type: "action", run: ["x"], on: ["ghost"] }]))[0]).toMatchObject({
      id: "a",
      field: "on",
    });
  });

  it("refuses an empty resources list unless owns_nothing says emptiness is meant", () => {
    expect(refusals(decl([]))[0]).toMatchObject({ id: "declaration", field: "resources" });
    expect(parseDeclaration(decl([], { owns_nothing: true })).ok).toBe(true);
    expect(refusals(decl([file()], { owns_nothing: true }))[0]).toMatchObject({ field: "owns_nothing" });
  });

  it("refuses a missing or wrong envelope field", () => {
    expect(refusals({ v: 2, node: "n", mode: "converged", resources: [file()] })[0]).toMatchObject({
      id: "declaration",
      field: "v",
    });
    expect(refusals({ v: 1, node: "n", mode: "owned", resources: [file()] })[0]).toMatchObject({
      field: "mode",
    });
    expect(refusals({ v: 1, mode: "converged", resources: [file()] })[0]).toMatchObject({ field: "node" });
    expect(refusals(decl([file({ secret: "s", content: undefined })]))[0]).toMatchObject({
      id: "f",
      field: "secret",
    });
  });

  it("takes the signed order (serial, issued_at) as optional, and refuses a malformed one naming the field", () => {
    expect(parseDeclaration(decl([file()])).ok).toBe(true);
    const ordered = parseDeclaration(decl([file()], { serial: 9, issued_at: "2026-01-05T10:00:00.5Z" }));
    expect(ordered).toMatchObject({ ok: true, value: { serial: 9, issued_at: "2026-01-05T10:00:00.5Z" } });
    for (const serial of [0, -1, 1.5, "3", null, 2 ** 60]) {
      const said = refusals(decl([file()], { serial }));
      expect(said).toHaveLength(1);
      expect(said[0]).toMatchObject({ id: "declaration", field: "serial" });
    }
    for (const issued_at of ["yesterday", "2026-01-05T10:00:00+02:00", "2026-01-05", 1767607200])
      expect(refusals(decl([file()], { issued_at }))[0]).toMatchObject({ field: "issued_at" });
  });

  it("refuses hostile bodies before parsing: not JSON, not UTF-8, too deep, too big", () => {
    const reason = (b: string | Uint8Array) => {
      const p = parseDeclarationBody(b);
      return p.ok ? "" : p.refusals[0]!.reason;
    };
    expect(reason("{nope")).toContain("not JSON");
    expect(reason(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]))).toContain("UTF-8");
    expect(reason("[".repeat(10_000) + "]".repeat(10_000))).toContain("deeper");
    expect(reason(Buffer.alloc(17 * 1024 * 1024, 32))).toContain("is 17 MiB, more than the 16 MiB allowed");
  });
});
