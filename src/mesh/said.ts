// What `mesh up` says while it runs, one line each: an enrolment answered or refused, a node added or removed,
// a message refused (not the vocabulary, or on another node's subject), a declaration a node refused. A node may
// say the same wrong thing every second: the same line is said once per UP_SAID_REPEAT_MS, with how many more.
import { type FSWatcher, watch } from "node:fs";
import { UP_SAID_REPEAT_MS } from "../defaults.ts";
import { printable } from "../vocabulary/index.ts";
import type { MeshDir } from "./layout.ts";

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

/**
 * The node records as they change under `up` (`node add`, `node rm` run by another command): each name that
 * comes or goes is told once. Stopped by the returned function.
 */
export function followRecords(mesh: MeshDir, told: (node: string, change: "added" | "removed") => void) {
  let known = new Set(names(mesh));
  let watcher: FSWatcher | null = null;
  const look = () => {
    const now = new Set(names(mesh));
    for (const n of now) if (!known.has(n)) told(n, "added");
    for (const n of known) if (!now.has(n)) told(n, "removed");
    known = now;
  };
  try {
    watcher = watch(mesh.path("nodes"), { persistent: false }, look);
    watcher.on("error", () => undefined);
  } catch {
    // no watch on this file system: the changes go unsaid, nothing else depends on them
  }
  return () => watcher?.close();
}

function names(mesh: MeshDir): string[] {
  try {
    return mesh.nodes().map((r) => r.node);
  } catch {
    return [];
  }
}
