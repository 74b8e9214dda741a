// Reports that must arrive: kept on disk, in order, until the server acknowledges each one. An entry that is
// malformed or not this node's is moved aside (outbox/rejected/) and said in the next report: one bad file
// never blocks the reports after it, and is never sent.
import { lstatSync, mkdirSync, readFileSync, renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { MAX_OUTBOX_ENTRY_BYTES, STATE_DIR_MODE, STATE_FILE_MODE } from "../defaults.ts";
import { fsyncDirSync, writeFileAtomicSync } from "../durable/index.ts";
import { printable } from "../printable.ts";
import { Report } from "../vocabulary/index.ts";
import type { State } from "./state.ts";

const DIR = "outbox";
const REJECTED = join(DIR, "rejected");
/** What was set aside and not yet said in a report, one line each. */
const REJECTED_NOTE = "outbox-rejected-note";

const Entry = z.object({ format: z.literal(1), report: Report });

/** Names sort in the order reports were made: a time, then a counter for reports within one millisecond. */
let counter = 0;
function nameFor(): string {
  counter = (counter + 1) % 1_000_000;
  return `${Date.now().toString().padStart(15, "0")}-${process.pid}-${counter.toString().padStart(6, "0")}.json`;
}

export class Outbox {
  constructor(private readonly state: State) {}

  private dir(): string {
    return join(this.state.ensure().dir, DIR);
  }

  /**
   * Durable before it returns: the caller may then ack the message the report is about. It carries what was set
   * aside since the last report; the note goes once the report carrying it is on disk.
   */
  put(report: Report): string {
    mkdirSync(this.dir(), { recursive: true, mode: STATE_DIR_MODE });
    const unsaid = this.state.readText(REJECTED_NOTE);
    const notes = unsaid?.split("\n").filter(Boolean) ?? [];
    const carried = notes.length ? { ...report, notes: [...(report.notes ?? []), ...notes] } : report;
    const name = nameFor();
    writeFileAtomicSync(
      join(this.dir(), name),
      `${JSON.stringify({ format: 1, report: carried })}\n`,
      STATE_FILE_MODE,
    );
    if (unsaid !== null) this.state.remove(REJECTED_NOTE);
    return name;
  }

  /** Waiting reports, oldest first; an entry that is not a report of this node's is set aside, never sent. */
  pending(): { name: string; report: Report }[] {
    const node = this.state.readNode()?.node;
    return this.state
      .list(DIR)
      .filter((n) => n.endsWith(".json"))
      .flatMap((name) => {
        const read = this.entry(name, node);
        if (typeof read !== "string") return [{ name, report: read }];
        this.reject(name, read);
        return [];
      });
  }

  /** The report in `name`, or why it is none of this node's (never quoting its content). */
  private entry(name: string, node: string | undefined): Report | string {
    const path = join(this.dir(), name);
    let text: string;
    try {
      const st = lstatSync(path);
      if (!st.isFile()) return "not a regular file";
      if (st.size > MAX_OUTBOX_ENTRY_BYTES) return `${st.size} bytes, too large to be a report`;
      text = readFileSync(path, "utf8");
    } catch (e) {
      return `cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return "not JSON";
    }
    const parsed = Entry.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return `not a report (${printable(issue?.path.join(".") || "entry", 60)}: ${printable(issue?.message ?? "", 80)})`;
    }
    const report = parsed.data.report;
    if (node !== undefined && report.node !== node)
      return `a report of node "${printable(report.node, 64)}", not this node's`;
    return report;
  }

  /** Moved aside, never deleted: a person may want to see what was there. The next report says so. */
  private reject(name: string, why: string): void {
    const aside = join(this.state.dir, REJECTED);
    mkdirSync(aside, { recursive: true, mode: STATE_DIR_MODE });
    try {
      renameSync(join(this.dir(), name), join(aside, name));
    } catch {
      return;
    }
    fsyncDirSync(this.dir());
    fsyncDirSync(aside);
    const before = this.state.readText(REJECTED_NOTE) ?? "";
    const line = `outbox entry ${printable(name, 80)} set aside in outbox/rejected/: ${why}`;
    this.state.writeText(REJECTED_NOTE, `${before}${line}\n`);
  }

  done(name: string): void {
    try {
      unlinkSync(join(this.dir(), name));
      fsyncDirSync(this.dir());
    } catch {
      // already sent and removed
    }
  }

  /**
   * Send every waiting report in order; stops at the first the bus does not acknowledge, and says why (null when
   * every one went).
   */
  async flush(
    send: (r: Report) => Promise<{ ok: true } | { ok: false; reason: string }>,
  ): Promise<string | null> {
    for (const { name, report } of this.pending()) {
      const sent = await send(report);
      if (!sent.ok) return sent.reason;
      this.done(name);
    }
    return null;
  }
}
