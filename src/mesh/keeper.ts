// What each `mesh up` keeps of the buckets in memory: the nodes in the mesh and their codes, read again when a
// key changes (told by the bucket's own subjects, and checked every KV_RESYNC_MS in case a change was missed
// while the link was down). From them it renders its own servers' user list and reloads them, so a node added
// or removed from any operator console reaches every machine's servers (while the servers authenticate by the
// user list: with per-node credentials that need no list this part goes, and the memory stays).

import type { Subscription } from "@nats-io/transport-node";
import { KV_RESYNC_MS, KV_SETTLE_MS } from "../defaults.ts";
import { meshUsers } from "./conf.ts";
import type { Entry } from "./kv.ts";
import type { MeshDir } from "./layout.ts";
import { reloadUsers } from "./servers.ts";
import { allNodes, type CodeRecord, type NodeRecord, type State } from "./state.ts";

/** Where the controller of server `i`'s machine says how far its user list has followed the buckets. */
export const renderedSubject = (i: number): string => `mesh.users.${i}`;

/** The buckets' last sequences a user list was rendered from. */
export interface Rendered {
  nodes: number;
  codes: number;
}

export class Keeper {
  nodes = new Map<string, NodeRecord>();
  /** What this machine's servers' user list was last rendered from (and reloaded). */
  rendered: Rendered = { nodes: 0, codes: 0 };
  codes = new Map<string, Entry<CodeRecord>>();
  private subs: Subscription[] = [];
  private settle: NodeJS.Timeout | null = null;
  private resync: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private first = true;
  /** When the soonest live code expires: the list is rendered again then. */
  private nextExpiry = Number.POSITIVE_INFINITY;

  constructor(
    private readonly mesh: MeshDir,
    private readonly state: State,
    private readonly warn: (line: string) => void,
    /** Told of each node that came or went since the last read (not of those there at the first). */
    private readonly told: (node: string, change: "added" | "removed") => void = () => {},
  ) {}

  /** `servers`: this machine's, whose user list it keeps and answers for. */
  async start(servers: number[]): Promise<void> {
    await this.sync();
    const nc = this.state.bus.nc;
    for (const b of [this.state.nodes, this.state.codes])
      this.subs.push(nc.subscribe(`$KV.${b.name}.>`, { callback: () => this.changed() }));
    for (const i of servers)
      this.subs.push(
        nc.subscribe(renderedSubject(i), {
          callback: (_e, m) => void m.respond(JSON.stringify(this.rendered)),
        }),
      );
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
      // a code that expired since: its enrolling user goes from the list, though no key changed
      if (moved || this.nextExpiry <= Date.now()) this.changed();
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
    const now = Date.now();
    const live = codes.map((c) => c.value).filter((c) => Date.parse(c.expires_at) > now);
    this.nextExpiry = Math.min(Number.POSITIVE_INFINITY, ...live.map((c) => Date.parse(c.expires_at)));
    await reloadUsers(this.mesh, meshUsers(this.mesh.secrets(), nodes, live));
    this.rendered = mark;
    this.first = false;
  }
}
