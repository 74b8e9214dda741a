// `mesh migrate`: an older mesh directory carried forward to format 3, or refused in one line with nothing changed.
//   format 2 (enrolling users were NODES'): ENROL's key made and kept in accounts.json (written whole, before the
//     bus is reached), its account's claims pushed over SYS (the `full` resolver takes an account it has not seen
//     at run time, and keeps it), mesh.json marked format 3. Codes issued before stay NODES' users: NODES still
//     imports the enrolment service for them, and each is revoked there (to its expiry) when spent or removed.
//   format 1 (its nodes in nodes/*.json, its fleet view in fleet.json): the same, and before it every file is read
//     and checked against format 1's own schema; the records are written into the buckets (made if this is the
//     first `up`), and the old files go to migrated-v1/ (kept for the operator to delete; nothing reads them).
// This machine's servers are started for it when none of the mesh answers, and stopped after.
// Only a directory whose bus signs in with keys (accounts.json) is moved: one made with passwords is refused in
// one line, since its nodes hold passwords the keyed bus does not take (they enrol again, in a new mesh).
import { existsSync, mkdirSync, readdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { MESH_DIR_MODE, MESH_FORMAT, MESH_FORMAT_FILES, NODE_RECORD_FORMAT } from "../defaults.ts";
import { NodeName } from "../vocabulary/index.ts";
import { ACCOUNT_NAMES, type AccountKeys, accountJwt, makeAccountKeys, seedsOf } from "./accounts.ts";
import { awaitStreams, type Bus, BusDown, connectBus } from "./bus.ts";
import { currentRevocations, pushClaims } from "./claims.ts";
import { syncDir, writeAtomic } from "./files.ts";
import { merged } from "./fleet.ts";
import { Conflict } from "./kv.ts";
import { type MeshDir, MeshRefused, madeWithPasswords } from "./layout.ts";
import { type RunningServer, startServer, stopServer } from "./servers.ts";
import {
  type CodeRecord,
  ensureBuckets,
  FleetEntry,
  type NodeRecord,
  Push,
  replicasOf,
  type State,
  stateOf,
} from "./state.ts";

const B64Key = z.string().regex(/^[A-Za-z0-9+/]{43}=$/);

/** A node's file as format 1 wrote it. */
const NodeFileV1 = z.strictObject({
  format: z.literal(MESH_FORMAT_FILES),
  node: NodeName,
  /** The code's enrolling user and its expiry, until the code is spent. */
  enrol: z.strictObject({ user: z.string().regex(/^U[A-Z2-7]{55}$/), expires_at: z.string() }).nullable(),
  added_at: z.string(),
  enrolled_at: z.string().nullable(),
  keys: z.strictObject({ identity: B64Key, sealing: B64Key, overlay: B64Key }).nullable(),
  facts: z.record(z.string(), z.string()).nullable(),
  serial: z.number().int().min(0),
  pushes: z.array(Push),
  last_body: z.record(z.string(), z.unknown()).nullable(),
  moved_to: z.string().nullable(),
});
type NodeFileV1 = z.infer<typeof NodeFileV1>;

const FleetFileV1 = z.strictObject({
  format: z.literal(MESH_FORMAT_FILES),
  nodes: z.record(z.string(), FleetEntry.omit({ dropped_heartbeats: true })),
});

export interface Migrated {
  /** The format it was. */
  from: number;
  nodes: number;
  codes: number;
  fleet: number;
  /** Where format 1's files went; null from format 2. */
  kept: string | null;
}

interface Files {
  nodes: NodeFileV1[];
  fleet: z.infer<typeof FleetFileV1>["nodes"];
}

/** Every file of format 1, checked; a refusal naming the first that is not one. */
function readFiles(mesh: MeshDir): Files {
  const dir = mesh.path("nodes");
  const names = existsSync(dir)
    ? readdirSync(dir).filter((f) => f.endsWith(".json") && !f.startsWith("."))
    : [];
  const nodes = names.sort().map((f) => mesh.parsed(join(dir, f), NodeFileV1));
  for (const [i, n] of nodes.entries())
    if (`${n.node}.json` !== names[i]) throw new MeshRefused(`${join(dir, names[i]!)} names node ${n.node}`);
  const file = mesh.path("fleet.json");
  const fleet = existsSync(file) ? mesh.parsed(file, FleetFileV1).nodes : {};
  return { nodes, fleet };
}

/** A node's record, its code (an enrolling user not yet spent), as format 2 keeps them. */
export function recordsOf(v1: NodeFileV1): { record: NodeRecord; code: CodeRecord | null } {
  const { format: _f, ...rest } = v1;
  const record: NodeRecord = { ...rest, format: NODE_RECORD_FORMAT, labels: {} };
  if (!v1.enrol) return { record, code: null };
  // its JWT expires when it said: the code keeps that expiry, and nothing else can spend it again once enrolled
  const spent = v1.enrolled_at && v1.keys ? { at: v1.enrolled_at, keys: v1.keys } : null;
  const { user, expires_at } = v1.enrol;
  return { record, code: { node: v1.node, user, added_at: v1.added_at, expires_at, spent } };
}

async function write(state: State, files: Files): Promise<Pick<Migrated, "nodes" | "codes" | "fleet">> {
  let codes = 0;
  let fleet = 0;
  for (const v1 of files.nodes) {
    const { record, code } = recordsOf(v1);
    await state.nodes.create(v1.node, record).catch(async (e) => {
      const there = e instanceof Conflict ? await state.nodes.get(v1.node) : null;
      // a migration interrupted after this node: the same node, already there
      if (there && JSON.stringify(there.value.keys) === JSON.stringify(record.keys)) return;
      if (there)
        throw new MeshRefused(`the bus already holds a different node ${v1.node}: nothing more moved`);
      throw e;
    });
    if (code && !(await state.codes.get(v1.node))) {
      await state.codes.put(v1.node, code);
      codes++;
    }
    const entry = files.fleet[v1.node];
    if (entry) {
      await state.fleet.put(
        v1.node,
        merged(null, { heartbeat: entry.heartbeat ?? undefined, report: entry.report ?? undefined }),
      );
      fleet++;
    }
  }
  return { nodes: files.nodes.length, codes, fleet };
}

/** The bus reached; this machine's servers started first when none of the mesh answers (stopped by `done`). */
async function reach(mesh: MeshDir): Promise<{ bus: Bus; started: RunningServer[] }> {
  try {
    return { bus: await connectBus(mesh), started: [] };
  } catch (e) {
    if (!(e instanceof BusDown)) throw e;
  }
  const started: RunningServer[] = [];
  try {
    for (const [j] of mesh.servers().entries()) started.push(await startServer(mesh, j + 1));
    return { bus: await connectBus(mesh, { reconnect: true, name: "mesh-host mesh migrate" }), started };
  } catch (e) {
    await Promise.all(started.map(stopServer));
    throw e;
  }
}

/** The account keys, ENROL's made and written into accounts.json (whole, 0600) when it has none yet. */
function withEnrolKey(mesh: MeshDir): AccountKeys {
  const seeds = mesh.seeds();
  if (!seeds.enrol) {
    const enrol = seedsOf(makeAccountKeys()).enrol;
    writeAtomic(mesh.path("accounts.json"), `${JSON.stringify({ ...seeds, enrol })}\n`);
  }
  return mesh.accountKeys();
}

/** ENROL's claims on every server (those it holds kept: a migration run again pushes the same account). */
async function pushEnrol(mesh: MeshDir, keys: AccountKeys): Promise<void> {
  const sys = await connectBus(mesh, { system: true, name: "mesh-host mesh migrate (system)" });
  try {
    const held = await currentRevocations(sys.nc, keys, "ENROL");
    await pushClaims(sys.nc, accountJwt(keys, "enrol", held), ACCOUNT_NAMES.enrol);
  } finally {
    await sys.close();
  }
}

/** Format 1's files onto the bus (its buckets made first when this is their first use). */
async function moveFiles(bus: Bus, replicas: number, files: Files, warn: (line: string) => void) {
  const state = stateOf(bus);
  const ready = await awaitStreams(
    bus,
    replicas,
    () => false,
    warn,
    () => ensureBuckets(state, replicasOf(replicas)),
  );
  if (!ready) throw new Error("JetStream did not answer");
  return await write(state, files);
}

/** Format 1's files, once on the bus, go to migrated-v1/ (kept for the operator; nothing reads them). */
function keepFiles(mesh: MeshDir): string {
  const kept = mesh.path("migrated-v1");
  mkdirSync(kept, { recursive: true, mode: MESH_DIR_MODE });
  for (const f of ["nodes", "fleet.json"])
    if (existsSync(mesh.path(f))) renameSync(mesh.path(f), join(kept, f));
  return kept;
}

export async function migrate(mesh: MeshDir, warn: (line: string) => void): Promise<Migrated> {
  const config = mesh.anyConfig();
  // asked first: a directory of the password bus is format 2 too, and "nothing to migrate" would misread it
  if (!existsSync(mesh.path("accounts.json"))) throw new MeshRefused(madeWithPasswords(mesh.dir));
  if (config.format === MESH_FORMAT)
    throw new MeshRefused(`${mesh.dir} is format ${MESH_FORMAT} already: nothing to migrate`);
  const files = config.format === MESH_FORMAT_FILES ? readFiles(mesh) : null;
  const keys = withEnrolKey(mesh);
  const { bus, started } = await reach(mesh);
  try {
    await pushEnrol(mesh, keys);
    const counts = files
      ? await moveFiles(bus, config.servers.length, files, warn)
      : { nodes: 0, codes: 0, fleet: 0 };
    writeAtomic(mesh.path("mesh.json"), `${JSON.stringify({ ...config, format: MESH_FORMAT }, null, 2)}\n`);
    const kept = files ? keepFiles(mesh) : null;
    syncDir(mesh.dir);
    return { from: config.format, ...counts, kept };
  } finally {
    await bus.close();
    await Promise.all(started.map(stopServer));
  }
}
