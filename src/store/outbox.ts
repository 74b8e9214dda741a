// Reports that must arrive: kept on disk, in order, until the server acknowledges each one.
import { mkdirSync, readFileSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { Report } from "../vocabulary/index.ts";
import { fsyncDirSync, writeFileAtomicSync } from "./atomic.ts";
import type { State } from "./state.ts";

const DIR = "outbox";

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

  /** Durable before it returns: the caller may then ack the message the report is about. */
  put(report: Report): string {
    mkdirSync(this.dir(), { recursive: true, mode: 0o700 });
    const name = nameFor();
    writeFileAtomicSync(join(this.dir(), name), `${JSON.stringify({ format: 1, report })}\n`, 0o600);
    return name;
  }

  /** Waiting reports, oldest first; a file that cannot be read is skipped (and left for a person). */
  pending(): { name: string; report: Report }[] {
    return this.state
      .list(DIR)
      .filter((n) => n.endsWith(".json"))
      .flatMap((name) => {
        try {
          return [
            {
              name,
              report: (JSON.parse(readFileSync(join(this.dir(), name), "utf8")) as { report: Report }).report,
            },
          ];
        } catch {
          return [];
        }
      });
  }

  done(name: string): void {
    try {
      unlinkSync(join(this.dir(), name));
      fsyncDirSync(this.dir());
    } catch {
      // already sent and removed
    }
  }

  /** Send every waiting report in order; stops at the first the bus does not acknowledge. Returns how many went. */
  async flush(send: (r: Report) => Promise<void>): Promise<number> {
    let sent = 0;
    for (const { name, report } of this.pending()) {
      await send(report);
      this.done(name);
      sent++;
    }
    return sent;
  }
}
