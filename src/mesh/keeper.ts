// What each `mesh up` keeps of the buckets in memory: the nodes in the mesh and their codes. Read whole once, then
// key by key: each change is heard on the bucket's own subjects and only that key is read again. Reading the whole
// of both buckets again after every change cost a full listing a change — 20,000 reads at 10,000 nodes, a second
// of the controller's CPU each, back to back through an enrolment (docs/performance.md, "The fleet simulated").
// A change missed while the link was down shows as a bucket whose last sequence moved with nothing heard: checked
// every KV_RESYNC_MS, and the whole is read again then. No user list is rendered from them: nodes and enrolling
// users sign in with JWTs the servers check against the accounts' keys, and a removal is a revocation pushed over
// the system account.

import type { Subscription } from "@nats-io/transport-node";
import { KV_LIST_BATCH, KV_RESYNC_MS, KV_SETTLE_MS } from "../defaults.ts";
import type { Entry } from "./kv.ts";
import { allNodes, type CodeRecord, type NodeRecord, type State } from "./state.ts";

/** The buckets' last sequences the memory was read from. */
export interface Rendered {
  nodes: number;
  codes: number;
}

type Kind = keyof Rendered;

export class Keeper {
  nodes = new Map<string, NodeRecord>();
  /** What the memory was last read from (every change up to these is in it). */
  rendered: Rendered = { nodes: 0, codes: 0 };
  codes = new Map<string, Entry<CodeRecord>>();
  /** How many whole reads were made (the first included): what the test of key-by-key reading counts. */
  wholeReads = 0;
  private subs: Subscription[] = [];
  private settle: NodeJS.Timeout | null = null;
  private resync: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly dirty = { nodes: new Set<string>(), codes: new Set<string>() };
  private whole = false;
  /** A mark seen ahead of the memory with nothing heard: read whole if the next check finds it still unread. */
  private suspect: Rendered | null = null;
  private first = true;

  constructor(
    private readonly state: State,
    private readonly warn: (line: string) => void,
    /** Told of each node that came or went since the last read (not of those there at the first). */
    private readonly told: (node: string, change: "added" | "removed") => void = () => {},
  ) {}

  async start(): Promise<void> {
    this.whole = true;
    await this.sync();
    const nc = this.state.bus.nc;
    for (const kind of ["nodes", "codes"] as const) {
      const prefix = `$KV.${this.state[kind].name}.`;
      this.subs.push(
        nc.subscribe(`${prefix}>`, {
          callback: (_e, m) => this.touched(kind, m.subject.slice(prefix.length)),
        }),
      );
    }
    this.resync = setInterval(() => void this.check(), KV_RESYNC_MS);
  }

  stop(): void {
    for (const s of this.subs) s.unsubscribe();
    if (this.settle) clearTimeout(this.settle);
    if (this.resync) clearInterval(this.resync);
  }

  /** A key changed (heard, or written by this controller): read again with the others changed meanwhile. */
  touched(kind: Kind, key: string): void {
    this.dirty[kind].add(key);
    this.settle ??= setTimeout(() => {
      this.settle = null;
      void this.sync();
    }, KV_SETTLE_MS);
  }

  /** The buckets' last sequences against the memory's: a move nothing told of is read whole at the next check. */
  private async check(): Promise<void> {
    try {
      if (this.running || this.settle) return;
      const mark = await this.mark();
      const behind = (m: Rendered) => m.nodes > this.rendered.nodes || m.codes > this.rendered.codes;
      if (this.suspect && behind(this.suspect)) {
        this.whole = true;
        void this.sync();
      }
      this.suspect = behind(mark) ? mark : null;
    } catch {
      // the link is down: the next check tries again
    }
  }

  /** One read at a time; what changed during a read is read after it. */
  sync(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.read()
      .catch((e: Error) =>
        this.warn(`cannot read the mesh's nodes from the bus: ${e.message.split("\n")[0]}`),
      )
      .finally(() => {
        this.running = null;
        if (this.whole || this.dirty.nodes.size || this.dirty.codes.size) void this.sync();
      });
    return this.running;
  }

  private async mark(): Promise<Rendered> {
    return { nodes: await this.state.nodes.lastSeq(), codes: await this.state.codes.lastSeq() };
  }

  /** The whole when asked for, else the keys changed; the mark taken first, so a change after it is heard. */
  private async read(): Promise<void> {
    const mark = await this.mark();
    if (this.whole) {
      this.whole = false;
      this.dirty.nodes.clear();
      this.dirty.codes.clear();
      await this.readWhole();
    } else {
      const nodes = [...this.dirty.nodes];
      const codes = [...this.dirty.codes];
      this.dirty.nodes.clear();
      this.dirty.codes.clear();
      await this.readKeys(nodes, codes);
    }
    this.rendered = mark;
  }

  private async readWhole(): Promise<void> {
    this.wholeReads++;
    const [nodes, codes] = await Promise.all([allNodes(this.state), this.state.codes.entries()]);
    const before = this.first ? null : this.nodes;
    this.nodes = new Map(nodes.map((n) => [n.node, n]));
    for (const n of before ? this.nodes.keys() : []) if (!before!.has(n)) this.told(n, "added");
    for (const n of before?.keys() ?? []) if (!this.nodes.has(n)) this.told(n, "removed");
    this.codes = new Map(codes.map((c) => [c.key, c]));
    this.first = false;
  }

  private async readKeys(nodes: string[], codes: string[]): Promise<void> {
    for (let i = 0; i < nodes.length; i += KV_LIST_BATCH) {
      const batch = nodes.slice(i, i + KV_LIST_BATCH);
      const got = await Promise.all(batch.map((key) => this.state.nodes.get(key)));
      for (const [j, key] of batch.entries()) this.keepNode(key, got[j]?.value ?? null);
    }
    for (let i = 0; i < codes.length; i += KV_LIST_BATCH) {
      const batch = codes.slice(i, i + KV_LIST_BATCH);
      const got = await Promise.all(batch.map((key) => this.state.codes.get(key)));
      for (const [j, key] of batch.entries()) {
        const entry = got[j];
        if (entry) this.codes.set(key, entry);
        else this.codes.delete(key);
      }
    }
  }

  private keepNode(key: string, record: NodeRecord | null): void {
    const had = this.nodes.has(key);
    if (record) this.nodes.set(key, record);
    else this.nodes.delete(key);
    if (!had && record) this.told(key, "added");
    if (had && !record) this.told(key, "removed");
  }
}
