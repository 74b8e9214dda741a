// What one apply has asked the container runtime, shared by the plan's and the apply's decisions: the
// applier's side of the runtime driver (src/system/arch/runtime.ts), which knows no apply.
import {
  type Answer,
  type InfoOf,
  type Kind,
  RUNTIME_TYPES,
  Runtime,
  type RuntimeFinder,
} from "../../../system/arch/index.ts";
import type { Resource, RuntimeKind } from "../../../vocabulary/index.ts";
import type { DecideContext } from "../../types.ts";

/**
 * What one apply has asked the runtime, kept until a step changes it: the plan and the apply's own
 * decisions share it, and the first question asks about everything declared, every kind at once.
 */
export class Session {
  private readonly cache = new Map<string, Promise<Answer<unknown>>>();
  private prefetched = false;
  private readonly runtimes = new Map<string, Runtime | string>();

  constructor(
    private readonly finder: RuntimeFinder,
    private readonly ctx: DecideContext,
  ) {}

  runtime(named: RuntimeKind | undefined): Runtime | string {
    const key = named ?? "";
    if (!this.runtimes.has(key)) {
      const cmd = this.finder.find(named ?? this.declaredRuntime());
      this.runtimes.set(key, typeof cmd === "string" ? cmd : new Runtime(cmd, this.ctx.ports.exec));
    }
    return this.runtimes.get(key)!;
  }

  /** The runtime one of the declaration's resources names: all of them use it (checked on arrival). */
  private declaredRuntime(): RuntimeKind | undefined {
    for (const r of this.ctx.declared ?? [])
      if (RUNTIME_TYPES.has(r.type) && runtimeOf(r)) return runtimeOf(r);
    return undefined;
  }

  /** What the runtime says of `name`, asked together with everything else the declaration names. */
  async ask<K extends Kind>(rt: Runtime, kind: K, name: string): Promise<Answer<InfoOf<K>>> {
    const key = `${rt.kind}/${kind}/${name}`;
    if (!this.cache.has(key)) {
      if (!this.prefetched) {
        this.prefetched = true;
        const all = this.declaredNames(rt);
        all[kind].add(name);
        await Promise.all((Object.keys(all) as Kind[]).map((k) => this.fetch(rt, k, [...all[k]])));
      }
      if (!this.cache.has(key)) await this.fetch(rt, kind, [name]);
    }
    return (await this.cache.get(key)!) as Answer<InfoOf<K>>;
  }

  /** A step changed `name`: the next question asks the runtime again. */
  forget(rt: Runtime, kind: Kind, name: string): void {
    this.cache.delete(`${rt.kind}/${kind}/${name}`);
  }

  private fetch(rt: Runtime, kind: Kind, names: string[]): Promise<unknown> {
    const todo = names.filter((n) => !this.cache.has(`${rt.kind}/${kind}/${n}`));
    if (!todo.length) return Promise.resolve();
    const asked = rt.inspect(kind, todo);
    for (const n of todo)
      this.cache.set(
        `${rt.kind}/${kind}/${n}`,
        asked.then((m) => m.get(n) ?? null),
      );
    return asked;
  }

  private declaredNames(rt: Runtime): Record<Kind, Set<string>> {
    const all: Record<Kind, Set<string>> = {
      container: new Set(),
      network: new Set(),
      volume: new Set(),
      image: new Set(),
    };
    for (const r of this.ctx.declared ?? []) {
      if (!RUNTIME_TYPES.has(r.type)) continue;
      const named = runtimeOf(r);
      if (named && named !== rt.kind) continue;
      if (r.type === "container" || r.type === "network" || r.type === "volume") all[r.type].add(r.name);
      if (r.type === "image") all.image.add(r.ref);
    }
    return all;
  }
}

/** The runtime a resource names, if it is of a type that names one. */
const runtimeOf = (r: Resource): RuntimeKind | undefined => ("runtime" in r ? r.runtime : undefined);

const sessions = new WeakMap<object, Session>();

/** The session of the apply `ctx` belongs to: one per apply, found by the apply's own ports object. */
export function sessionOf(ctx: DecideContext, finder: RuntimeFinder): Session {
  let s = sessions.get(ctx.ports);
  if (!s) {
    s = new Session(finder, ctx);
    sessions.set(ctx.ports, s);
  }
  return s;
}

/**
 * The id of another resource of `type` this declaration names `name` by: the object is its now (the design
 * records' `store` → `postgres.server`), so the old id's removal must take nothing; it was stopped and
 * recreated by the old id's removal after the new id had taken it over in place.
 */
export function declaredElsewhere(ctx: DecideContext, type: Resource["type"], name: string, id: string) {
  return ctx.declared?.find((r) => r.type === type && r.id !== id && "name" in r && r.name === name)?.id;
}

/** What an old id's removal says of an object another id now declares. */
export const takenOver = (name: string, by: string) =>
  `${name} is now declared by ${by}: taken over in place, nothing removed`;
