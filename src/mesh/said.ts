// What `mesh up` says while it runs, one line each: an enrolment answered or refused, a node added or removed,
// a message refused (not the vocabulary, or on another node's subject), a declaration a node refused. A node may
// say the same wrong thing every second: the same line is said once per UP_SAID_REPEAT_MS, with how many more.
import { UP_SAID_REPEAT_MS } from "../defaults.ts";
import { printable } from "../printable.ts";

export class Said {
  private readonly last = new Map<string, { at: number; more: number }>();

  constructor(
    private readonly line: (text: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** `text` under `key`, unless the same key was said within UP_SAID_REPEAT_MS (then counted, said later). */
  say(key: string, text: string): void {
    const seen = this.last.get(key);
    const now = this.now();
    if (seen && now - seen.at < UP_SAID_REPEAT_MS) {
      seen.more++;
      return;
    }
    const more = seen?.more ? ` (and ${seen.more} more like it since)` : "";
    this.last.set(key, { at: now, more: 0 });
    this.line(`${text}${more}`);
  }
}

export function recordLine(node: string, change: "added" | "removed"): string {
  return change === "added"
    ? `added node ${node}`
    : `removed node ${node}: its users and consumer are gone, and its messages are no longer read`;
}

/** A node's name as it arrived on a subject: printable and short, never trusted to be one. */
export function subjectNode(subject: string): string {
  return printable(subject.split(".").slice(2).join("."), 64);
}
