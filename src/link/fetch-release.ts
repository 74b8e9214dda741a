// Reading a release from the mesh's object store (protocol.md "Releases"): direct gets on its stream, the one
// JetStream API a node may use for it. Nothing is created on the bus (no consumer, ordered or not): a meta is the
// last message on its subject, a chunk the next message on the object's chunk subject at or after a sequence, so
// a fetch cut anywhere resumes from the sequence after the last chunk it kept.
import type { NatsConnection } from "@nats-io/transport-node";
import { RELEASE_GET_TIMEOUT_MS } from "../defaults.ts";
import {
  ObjectMeta,
  RELEASE_DIRECT_GET,
  RELEASE_STREAM,
  releaseChunkSubject,
  releaseMetaSubject,
} from "../vocabulary/index.ts";
import { isNoResponders, messageOf } from "./failures.ts";

/** One chunk of an object: the stream sequence it sits at, and its bytes. */
export interface Chunk {
  seq: number;
  data: Uint8Array;
}

/** What the run loop reads releases through; each call fails (throws) with why when the bus does not answer. */
export interface ReleaseSource {
  /** The object's meta, or null when the bucket holds no such object. */
  meta(name: string): Promise<ObjectMeta | null>;
  /** The object's first chunk at or after stream sequence `from`, or null when there is none. */
  chunk(nuid: string, from: number): Promise<Chunk | null>;
}

type Got = { seq: number; data: Uint8Array } | null;

export function releaseSource(nc: NatsConnection): ReleaseSource {
  const get = async (query: object, what: string): Promise<Got> => {
    let m: Awaited<ReturnType<NatsConnection["request"]>>;
    try {
      m = await nc.request(RELEASE_DIRECT_GET, JSON.stringify(query), { timeout: RELEASE_GET_TIMEOUT_MS });
    } catch (e) {
      // nothing answers a direct get on a stream that is not there: the mesh has stored no release yet
      if (isNoResponders(e))
        throw new Error(`the mesh stores no releases (nothing answers for ${RELEASE_STREAM})`);
      throw new Error(`reading ${what} failed: ${messageOf(e)}`);
    }
    const code = m.headers?.code ?? 0;
    if (code === 404) return null;
    if (code !== 0)
      throw new Error(`reading ${what}: the server answered ${code} ${m.headers?.description ?? ""}`.trim());
    const seq = Number(m.headers?.get("Nats-Sequence"));
    if (!Number.isSafeInteger(seq) || seq < 1)
      throw new Error(`reading ${what}: the answer names no sequence`);
    return { seq, data: m.data };
  };
  return {
    async meta(name) {
      const got = await get({ last_by_subj: releaseMetaSubject(name) }, `release ${name}`);
      if (!got) return null;
      let json: unknown;
      try {
        json = JSON.parse(new TextDecoder().decode(got.data));
      } catch {
        throw new Error(`release ${name}: its meta is not JSON`);
      }
      const meta = ObjectMeta.safeParse(json);
      if (!meta.success) throw new Error(`release ${name}: its meta is malformed`);
      return meta.data.deleted ? null : meta.data;
    },
    chunk: (nuid, from) => get({ seq: from, next_by_subj: releaseChunkSubject(nuid) }, `a chunk of ${nuid}`),
  };
}
