// A link opened whole: dialled, then bound, within one deadline. Each part has its own timeouts; the deadline is
// for a wait none of them ends (a simulated fleet of 10,000 redialling a cluster once found 64 such dials), since a
// node whose dial never returns never dials again.
import type { KeyObject } from "node:crypto";
import { LINK_OPEN_MS } from "../defaults.ts";
import type { Membership } from "../vocabulary/index.ts";
import { type Link, type LinkOptions, type Opened, openLink } from "./link.ts";

/**
 * Dial, then bind: a link that cannot bind its consumer is no link (the mesh's to answer, said plainly). Given up
 * past `openTimeoutMs`, saying which was under way and closing what it had opened: a wait that never ends must
 * not keep a node from dialling again.
 */
export async function openBound(
  membership: Membership,
  node: string,
  identity: KeyObject,
  opts: LinkOptions = {},
): Promise<Opened> {
  let dialled: Link | null = null;
  const attempt = (async (): Promise<Opened> => {
    const opened = await openLink(membership, node, identity, opts);
    if (!opened.ok) return opened;
    dialled = opened.link;
    opts.onDialled?.(opened.link.server);
    const bound = await opened.link.bind();
    if (bound.ok) return opened;
    await opened.link.close();
    return bound;
  })();
  const limitMs = opts.openTimeoutMs ?? LINK_OPEN_MS;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), limitMs);
  });
  const done = await Promise.race([attempt, late]);
  clearTimeout(timer);
  if (done) return done;
  // whatever the attempt still opens is closed when it ends; what it has opened, now
  void attempt.then((o) => (o.ok ? o.link.close("given up") : undefined)).catch(() => undefined);
  const stuck = dialled as Link | null;
  if (stuck) void stuck.close("given up").catch(() => undefined);
  const stage = stuck
    ? `${stuck.server} answered the dial but the bind did not finish`
    : "no server's dial finished";
  return { ok: false, kind: "unreachable", reason: `no link within ${limitMs / 1000} s: ${stage}` };
}
