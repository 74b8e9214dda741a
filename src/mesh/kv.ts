// JetStream key-value buckets, laid out as NATS's own KV (stream `KV_<bucket>`, subjects `$KV.<bucket>.<key>`,
// a delete is a purge marker rolling the key up), so `nats kv` reads them too. The client's KV package is not
// a dependency of ours: these few calls are all the controller needs. Every value is checked by its zod schema
// when read; a value that does not parse is refused in one line naming the bucket and key, never guessed at.
import { DiscardPolicy, JetStreamApiCodes, JetStreamApiError, StorageType } from "@nats-io/jetstream";
import { headers, type MsgHdrs } from "@nats-io/transport-node";
import type * as z from "zod";
import { KV_CAS_TRIES, KV_LIST_BATCH } from "../defaults.ts";
import { type Bus, jsCall } from "./bus.ts";
import { MeshRefused } from "./layout.ts";

export interface Entry<T> {
  key: string;
  value: T;
  /** The key's last stream sequence: what a compare-and-set names. */
  revision: number;
}

/** A compare-and-set that lost: another writer changed the key first (or made it, or removed it). */
export class Conflict extends Error {}

const OPERATION = "KV-Operation";
const ROLLUP = "Nats-Rollup";

function markerOf(h: MsgHdrs | undefined): boolean {
  const op = h?.get(OPERATION) ?? "";
  return op === "DEL" || op === "PURGE";
}

function lostRace(e: unknown): boolean {
  return (
    e instanceof JetStreamApiError &&
    (e.code === JetStreamApiCodes.StreamWrongLastSequence || /wrong last sequence/i.test(e.message))
  );
}

export class Bucket<T> {
  readonly stream: string;
  /**
   * The stream's last sequence as this process's own last write found it (its ack): what a serialised bucket's
   * next write expects, so one operator writing one record after another asks the stream's state only when someone
   * else wrote meanwhile. A hint, never trusted: a stale one loses the race and the stream is asked (see `serialised`).
   */
  private lastWritten: number | null = null;

  constructor(
    private readonly bus: Bus,
    readonly name: string,
    private readonly schema: z.ZodType<T>,
    /**
     * Every compare-and-set also names the whole bucket's last sequence. nats-server before 2.9.21 checks a
     * write's expected last sequence per subject only against its store, not against the writes a cluster is
     * still agreeing (nats-server#4320): raced writers naming one revision all won, so two pushes took one serial
     * and one code could be spent twice. The bucket-wide check counts those writes; its price is a read of the
     * stream's state a write and a lost race whenever any key of the bucket changed meanwhile, so it is for the
     * buckets whose writes must be one at a time (the nodes' serials, the codes), not the fleet view.
     */
    private readonly serialised = false,
  ) {
    this.stream = `KV_${name}`;
  }

  /** What a compare-and-set at `revision` expects of the stream (see `serialised`). */
  private async expecting(revision: number): Promise<{ lastSubjectSequence: number; lastSequence?: number }> {
    if (!this.serialised) return { lastSubjectSequence: revision };
    const last = this.lastWritten ?? (await this.lastSeq());
    return { lastSubjectSequence: revision, lastSequence: last };
  }

  subject(key: string): string {
    return `$KV.${this.name}.${key}`;
  }

  /** Made, or brought to this configuration: one value a key (history 1), replicated `replicas` times. */
  async ensure(replicas: number): Promise<void> {
    const config = {
      name: this.stream,
      subjects: [`$KV.${this.name}.>`],
      storage: StorageType.File,
      num_replicas: replicas,
      max_msgs_per_subject: 1,
      discard: DiscardPolicy.New,
      allow_rollup_hdrs: true,
      deny_delete: true,
      deny_purge: false,
      allow_direct: true,
    };
    const exists = await this.bus.jsm.streams.info(this.stream).then(
      () => true,
      () => false,
    );
    if (exists) await this.bus.jsm.streams.update(this.stream, config);
    else await this.bus.jsm.streams.add(config);
  }

  /** The key's value and revision; null when it was never written or was removed. */
  async get(key: string): Promise<Entry<T> | null> {
    const sm = await this.lastOf(key);
    if (!sm || markerOf(sm.header)) return null;
    return { key, value: this.parse(key, sm.data), revision: sm.seq };
  }

  /** Write whatever was there. */
  async put(key: string, value: T): Promise<number> {
    const ack = await jsCall(() => this.bus.js.publish(this.subject(key), this.encode(value)));
    return this.wrote(ack.seq);
  }

  /** A write of this process's acknowledged at `seq`: the stream's last, as far as this process knows. */
  private wrote(seq: number): number {
    this.lastWritten = seq;
    return seq;
  }

  /** Write only if the key is still at `revision`; a Conflict otherwise. */
  async update(key: string, value: T, revision: number): Promise<number> {
    return await this.publishAt(key, this.encode(value), revision);
  }

  /**
   * Publish to `key` expecting it at `revision`. A serialised bucket's write also loses when another key changed
   * (see `serialised`): that is no conflict of this key's, so it is tried again while the key stays at `revision`.
   */
  private async publishAt(
    key: string,
    data: string | Uint8Array,
    revision: number,
    h?: MsgHdrs,
  ): Promise<number> {
    for (let i = 1; ; i++) {
      try {
        // tried again after a timeout: a write that did land makes the next try a Conflict, never a double write
        const expect = await this.expecting(revision);
        const ack = await jsCall(() =>
          this.bus.js.publish(this.subject(key), data, { expect, ...(h ? { headers: h } : {}) }),
        );
        return this.wrote(ack.seq);
      } catch (e) {
        if (!lostRace(e)) throw e;
        this.lastWritten = null;
        if (!this.serialised || i >= KV_CAS_TRIES || (await this.revisionOf(key)) !== revision)
          throw new Conflict(`${this.name}/${key} was changed by another writer`);
      }
    }
  }

  /** The key's last stream sequence, its marker's included; 0 when it was never written. */
  private async revisionOf(key: string): Promise<number> {
    return (await this.lastOf(key))?.seq ?? 0;
  }

  /** The key's last message (a value or a removal's marker), by direct get; null when it was never written. */
  private async lastOf(key: string) {
    return await jsCall(() =>
      this.bus.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(key) }),
    );
  }

  /** Write only if the key holds nothing (never written, or removed); a Conflict when it holds a value. */
  async create(key: string, value: T): Promise<number> {
    try {
      return await this.update(key, value, 0);
    } catch (e) {
      if (!(e instanceof Conflict)) throw e;
    }
    const sm = await this.lastOf(key);
    if (sm && markerOf(sm.header)) return await this.update(key, value, sm.seq);
    throw new Conflict(`${this.name}/${key} exists`);
  }

  /** The key and its history go (a purge marker rolls it up); `revision` makes it a compare-and-set. */
  async remove(key: string, revision?: number): Promise<number> {
    const h = headers();
    h.set(OPERATION, "PURGE");
    h.set(ROLLUP, "sub");
    if (revision !== undefined) return await this.publishAt(key, new Uint8Array(), revision, h);
    const ack = await jsCall(() => this.bus.js.publish(this.subject(key), new Uint8Array(), { headers: h }));
    return this.wrote(ack.seq);
  }

  /**
   * Every live key's value: the keys from the stream's own subject list, then each key's last message, KV_LIST_BATCH
   * at a time. No consumer is made for it: a cluster that lost a server may place a new consumer on the lost one,
   * and its creation then never answers.
   */
  async entries(): Promise<Entry<T>[]> {
    const info = await jsCall(() =>
      this.bus.jsm.streams.info(this.stream, { subjects_filter: `$KV.${this.name}.>` }),
    );
    const keys = Object.keys(info.state.subjects ?? {})
      .map((subject) => subject.slice(this.name.length + 5))
      .sort();
    const out: Entry<T>[] = [];
    for (let i = 0; i < keys.length; i += KV_LIST_BATCH) {
      const got = await Promise.all(keys.slice(i, i + KV_LIST_BATCH).map((key) => this.get(key)));
      for (const entry of got) if (entry) out.push(entry);
    }
    return out;
  }

  /** The bucket's last sequence: changed means some key changed (a cheap check before a whole listing). */
  async lastSeq(): Promise<number> {
    return (await jsCall(() => this.bus.jsm.streams.info(this.stream))).state.last_seq;
  }

  private encode(value: T): string {
    return JSON.stringify(this.schema.parse(value));
  }

  private parse(key: string, data: Uint8Array): T {
    let json: unknown;
    try {
      json = JSON.parse(new TextDecoder().decode(data));
    } catch {
      throw new MeshRefused(`the bus's ${this.name}/${key} is not JSON: not read`);
    }
    const parsed = this.schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new MeshRefused(
        `the bus's ${this.name}/${key} is not one this version of mesh-host reads (at ${issue?.path.join(".") || "the top"})`,
      );
    }
    return parsed.data;
  }
}

/**
 * Read-modify-write with compare-and-set, read again and retried when another writer got there first: what
 * raises a serial, spends a code, records a stream sequence. `change` returns the new value, or throws to refuse.
 */
export async function modify<T, R>(
  bucket: Bucket<T>,
  key: string,
  change: (current: Entry<T> | null) => { value: T; result: R },
  tries: number,
): Promise<R> {
  return (await modified(bucket, key, change, tries)).result;
}

/**
 * `modify`, with the entry it wrote: its value and the key's new revision (what a later write may start from).
 * `first`, when given, is the key as the caller has just read it: the first try writes over it without reading.
 */
export async function modified<T, R>(
  bucket: Bucket<T>,
  key: string,
  change: (current: Entry<T> | null) => { value: T; result: R },
  tries: number,
  first?: Entry<T> | null,
): Promise<{ result: R; entry: Entry<T> }> {
  let current = first === undefined ? await bucket.get(key) : first;
  for (let i = 1; ; i++) {
    const { value, result } = change(current);
    try {
      const revision = current
        ? await bucket.update(key, value, current.revision)
        : await bucket.create(key, value);
      return { result, entry: { key, value, revision } };
    } catch (e) {
      if (!(e instanceof Conflict) || i >= tries) throw e;
    }
    current = await bucket.get(key);
  }
}
