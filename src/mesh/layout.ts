// The mesh directory (0700): what `init` made and what every other command reads and keeps.
//   mesh.json            the servers, the certificate's fingerprint, the mesh's public key
//   accounts.json 0600   the seeds of the bus's operator and accounts (SYS, MESH, NODES): every JWT is signed by one
//   signing.key   0600   the mesh's Ed25519 private key (PKCS#8 PEM)
//   tls/cert.pem, tls/key.pem (0600)   the bus's certificate: its fingerprint is what nodes pin
//   servers/<i>/         server.conf (the operator's and accounts' JWTs in it), server.pid, server.log, jetstream/,
//                        jwt/ (the server's account resolver: the accounts' newest claims, revocations and all)
//   nodes/<n>.json 0600  each node: its pending enrolling user, its public keys, its serial
//   fleet.json           what `up` heard last from each node
import { createPrivateKey, type KeyObject } from "node:crypto";
import { existsSync, readdirSync, readFileSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { MESH_FORMAT } from "../defaults.ts";
import { NodeName } from "../vocabulary/index.ts";
import { type AccountKeys, keysOfSeeds } from "./accounts.ts";
import { syncDir, writeAtomic } from "./files.ts";

/** Bad or stale input to a mesh command: one line, exit 2, nothing changed. */
export class MeshRefused extends Error {}

const B64Key = z.string().regex(/^[A-Za-z0-9+/]{43}=$/);

export const ServerEntry = z.strictObject({ host: z.string().min(1), port: z.number().int() });
export type ServerEntry = z.infer<typeof ServerEntry>;

export const MeshConfig = z.strictObject({
  format: z.literal(MESH_FORMAT),
  servers: z.array(ServerEntry).min(1),
  fingerprint: z.string().regex(/^[0-9a-f]{64}$/),
  mesh_key: B64Key,
  created_at: z.string(),
});
export type MeshConfig = z.infer<typeof MeshConfig>;

const Seed = z.string().regex(/^S[A-Z2-7]{57}$/);
export const MeshSeeds = z.strictObject({ operator: Seed, system: Seed, mesh: Seed, nodes: Seed });
export type MeshSeeds = z.infer<typeof MeshSeeds>;

export const Push = z.strictObject({
  serial: z.number().int().min(1),
  digest: z.string(),
  seq: z.number().int().nullable(),
  at: z.string(),
});
export type Push = z.infer<typeof Push>;

export const NodeRecord = z.strictObject({
  format: z.literal(MESH_FORMAT),
  node: NodeName,
  /** The code's enrolling user (its public nkey) and when it expires, until the code is spent. */
  enrol: z.strictObject({ user: z.string().regex(/^U[A-Z2-7]{55}$/), expires_at: z.string() }).nullable(),
  added_at: z.string(),
  enrolled_at: z.string().nullable(),
  keys: z.strictObject({ identity: B64Key, sealing: B64Key, overlay: B64Key }).nullable(),
  facts: z.record(z.string(), z.string()).nullable(),
  /** The highest serial this mesh has signed for the node: the next push takes one more. */
  serial: z.number().int().min(0),
  pushes: z.array(Push),
  /** The last declaration pushed, as given (sealed secrets and all, no serial): what a move carries. */
  last_body: z.record(z.string(), z.unknown()).nullable(),
  moved_to: z.string().nullable(),
});
export type NodeRecord = z.infer<typeof NodeRecord>;

export const FleetEntry = z.strictObject({
  heartbeat: z
    .strictObject({
      at: z.string(),
      version: z.string(),
      uptime_s: z.number(),
      confirmed: z.boolean(),
    })
    .nullable(),
  report: z
    .strictObject({
      at: z.string(),
      outcome: z.string(),
      seq: z.number().int(),
      digest: z.string(),
      serial: z.number().int().nullable(),
      mode: z.string().nullable(),
    })
    .nullable(),
});
export type FleetEntry = z.infer<typeof FleetEntry>;
export const Fleet = z.strictObject({
  format: z.literal(MESH_FORMAT),
  nodes: z.record(z.string(), FleetEntry),
});
export type Fleet = z.infer<typeof Fleet>;

export class MeshDir {
  constructor(readonly dir: string) {}

  path(...parts: string[]): string {
    return join(this.dir, ...parts);
  }

  serverDir(i: number): string {
    return this.path("servers", String(i));
  }

  /** The mesh as `init` made it; refused in one line when the directory is not a mesh. */
  config(): MeshConfig {
    const file = this.path("mesh.json");
    if (!existsSync(file))
      throw new MeshRefused(`${this.dir} is not a mesh (no mesh.json): run \`mesh-host mesh init\``);
    return this.parsed(file, MeshConfig);
  }

  /** The operator's and accounts' keys; a directory made by an older `init` (passwords) is refused, never misread. */
  accountKeys(): AccountKeys {
    const file = this.path("accounts.json");
    if (!existsSync(file))
      throw new MeshRefused(
        `${this.dir} has no accounts.json: it was made by an older mesh-host (passwords, not keys); make the mesh again with \`mesh-host mesh init\``,
      );
    const keys = keysOfSeeds(this.parsed(file, MeshSeeds));
    if (!keys) throw new MeshRefused(`${file} holds a seed that is not an Ed25519 nkey seed`);
    return keys;
  }

  signingKey(): KeyObject {
    return createPrivateKey(readFileSync(this.path("signing.key")));
  }

  certPem(): string {
    return readFileSync(this.path("tls", "cert.pem"), "utf8");
  }

  urls(): string[] {
    return this.config().servers.map((s) => `nats://${s.host}:${s.port}`);
  }

  node(name: string): NodeRecord | null {
    const file = this.nodeFile(name);
    return existsSync(file) ? this.parsed(file, NodeRecord) : null;
  }

  /** The node's record, or a refusal naming it. */
  known(name: string): NodeRecord {
    const record = this.node(name);
    if (!record) throw new MeshRefused(`node ${name} is not in this mesh (${this.dir})`);
    return record;
  }

  nodes(): NodeRecord[] {
    const dir = this.path("nodes");
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((f) => f.endsWith(".json") && !f.startsWith("."))
      .sort()
      .map((f) => this.parsed(join(dir, f), NodeRecord));
  }

  writeNode(record: NodeRecord): void {
    writeAtomic(this.nodeFile(record.node), `${JSON.stringify(NodeRecord.parse(record), null, 2)}\n`);
  }

  removeNode(name: string): void {
    unlinkSync(this.nodeFile(name));
    syncDir(this.path("nodes"));
  }

  fleet(): Fleet {
    const file = this.path("fleet.json");
    return existsSync(file) ? this.parsed(file, Fleet) : { format: MESH_FORMAT, nodes: {} };
  }

  writeFleet(fleet: Fleet): void {
    writeAtomic(this.path("fleet.json"), `${JSON.stringify(fleet)}\n`);
  }

  private nodeFile(name: string): string {
    return this.path("nodes", `${name}.json`);
  }

  private parsed<T>(file: string, schema: z.ZodType<T>): T {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new MeshRefused(`cannot read ${file}: ${code ?? "not JSON"}`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new MeshRefused(
        `${file} is not one this version of mesh-host reads (at ${issue?.path.join(".") || "the top"})`,
      );
    }
    return parsed.data;
  }
}
