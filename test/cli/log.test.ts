// The log line the host writes itself (src/cli/log.ts): pino's shape, secrets censored, an error kept readable.
import { describe, expect, it } from "vitest";
import { jsonLine, textLine } from "../../src/cli/log.ts";

describe("a log line", () => {
  it("is level, time, pid, the fields, then msg, as pino wrote it", () => {
    const line = jsonLine(30, { outcome: "applied", seq: 3 }, "apply finished");
    expect(Object.keys(JSON.parse(line))).toEqual(["level", "time", "pid", "outcome", "seq", "msg"]);
    expect(JSON.parse(line)).toMatchObject({
      level: 30,
      pid: process.pid,
      outcome: "applied",
      msg: "apply finished",
    });
    expect(JSON.parse(jsonLine(20, { a: 1 }))).not.toHaveProperty("msg");
  });

  it("censors a secret's name at the top and one object down, in JSON and in text", () => {
    const line = jsonLine(40, {
      password: "hunter2",
      token: "t0ken",
      membership: { password: "pw", user: "node.a" },
      nested: { key: "k3y" },
    });
    for (const secret of ["hunter2", "t0ken", '"pw"', "k3y"]) {
      expect(line).not.toContain(secret);
      expect(textLine(line)).not.toContain(secret);
    }
    expect(JSON.parse(line).membership).toEqual({ password: "[redacted]", user: "node.a" });
  });

  it("writes an err as its type, message and stack; a cycle costs the fields, not the line", () => {
    const err = JSON.parse(jsonLine(50, { err: new TypeError("no route") })).err;
    expect(err).toMatchObject({ type: "TypeError", message: "no route" });
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(JSON.parse(jsonLine(30, { loop }, "still said"))).toMatchObject({ msg: "still said" });
  });
});
