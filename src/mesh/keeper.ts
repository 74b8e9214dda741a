// What each `mesh up` keeps of the buckets in memory: the nodes in the mesh and their codes, read again when a
// key changes (told by the bucket's own subjects, and checked every KV_RESYNC_MS in case a change was missed
// while the link was down). No user list is rendered from them: nodes and enrolling users sign in with JWTs the
// servers check against the accounts' keys, and a removal is a revocation pushed over the system account.

import type { Subscription } from "@nats-io/transport-node";
import { KV_RESYNC_MS, KV_SETTLE_MS } from "../defaults.ts";
import type { Entry } from "./kv.ts";
import { allNodes, type CodeRecord, type NodeRecord, type State } from "./state.ts";

/** The buckets' last sequences the memory was read from. */
export interface Rendered {
  nodes: number;
  codes: number;
}

export class Keeper {
  nodes = new Map<string, NodeRecord>();
  /** What the memory was last read from. */
  rendered: Rendered = { nodes: 0, codes: 0 };
  codes = new Map<string, Entry<CodeRecord>>();
  private subs: Subscription[] = [];
  private settle: NodeJS.Timeout | null = null;
  private resync: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private first = true;

  constructor(
    private readonly state: State,
    private readonly warn: (line: string) => void,
    /** Told of each node that came or went since the last read (not of those there at the first). */
    private readonly told: (node: string, change: "added" | "removed") => void = () => {},
  ) {}

  async start(): Promise<void> {
    await this.sync();
    const nc = this.state.bus.nc;
    for (const b of [this.state.nodes, this.state.codes])
      this.subs.push(nc.subscribe(`$KV.${b.name}.>`, { callback: () => this.changed() }));
    this.resync = setInterval(() => void this.check(), KV_RESYNC_MS);
  }

  stop(): void {
    for (const s of this.subs) s.unsubscribe();
    if (this.settle) clearTimeout(this.settle);
    if (this.resync) clearInterval(this.resync);
  }

  /** Read again once the burst of changes has settled. */
  changed(): void {
    if (this.settle) clearTimeout(this.settle);
    this.settle = setTimeout(() => {
      this.settle = null;
      void this.sync();
    }, KV_SETTLE_MS);
  }

  /** The buckets' last sequences: read again only when one moved since the last read. */
  private async check(): Promise<void> {
    try {
      const mark = await this.mark();
      const moved = mark.nodes !== this.rendered.nodes || mark.codes !== this.rendered.codes;
      if (moved) this.changed();
    } catch {
      // the link is down: the next check tries again
    }
  }

  /** One read at a time; a change during a read reads again after it. */
  sync(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.read()
      .catch((e: Error) =>
        this.warn(`cannot read the mesh's nodes from the bus: ${e.message.split("\n")[0]}`),
      )
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          void this.sync();
        }
      });
    return this.running;
  }

  private async mark(): Promise<Rendered> {
    return { nodes: await this.state.nodes.lastSeq(), codes: await this.state.codes.lastSeq() };
  }

  private async read(): Promise<void> {
    const mark = await this.mark();
    const [nodes, codes] = await Promise.all([allNodes(this.state), this.state.codes.entries()]);
    const before = this.first ? null : this.nodes;
    this.nodes = new Map(nodes.map((n) => [n.node, n]));
    for (const n of before ? this.nodes.keys() : []) if (!before!.has(n)) this.told(n, "added");
    for (const n of before?.keys() ?? []) if (!this.nodes.has(n)) this.told(n, "removed");
    this.codes = new Map(codes.map((c) => [c.key, c]));
    this.rendered = mark;
    this.first = false;
  }
}
