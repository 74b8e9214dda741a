// The mesh directory (0700): what `init` made and what every other command reads and keeps.
//   mesh.json            the servers, the certificate's fingerprint, the mesh's public key
//   accounts.json 0600   the seeds of the bus's operator and accounts (SYS, MESH, NODES, ENROL): every JWT is signed
//                        by one
//   signing.key   0600   the mesh's Ed25519 private key (PKCS#8 PEM)
//   tls/cert.pem, tls/key.pem (0600)   the bus's certificate: its fingerprint is what nodes pin
//   servers/<i>/         server.conf (the operator's and accounts' JWTs in it), server.pid, server.log, jetstream/,
//                        jwt/ (the server's account resolver: the accounts' newest claims, revocations and all)
// The nodes, their codes and serials, and the fleet view are on the bus (state.ts), never here: a copy of this
// directory on another machine is an equal operator console. A directory of format 1 kept them in nodes/*.json
// and fleet.json; one of format 2 had no ENROL account (its enrolling users were NODES'); `mesh migrate` carries
// either forward (migrate.ts), and nothing else reads them.
import { createPrivateKey, type KeyObject } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { MESH_FORMAT, MESH_FORMAT_FILES, MESH_FORMAT_NODES_ENROL } from "../defaults.ts";
import { type AccountKeys, keysOfSeeds } from "./accounts.ts";

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
/** The same file made by a mesh-host whose node records were files (format 1): `mesh migrate` moves them. */
export const MeshConfigFiles = MeshConfig.extend({ format: z.literal(MESH_FORMAT_FILES) });
export type MeshConfigFiles = z.infer<typeof MeshConfigFiles>;
/** The same file made by a mesh-host whose enrolling users were NODES' (format 2): `mesh migrate` makes ENROL. */
export const MeshConfigNodesEnrol = MeshConfig.extend({ format: z.literal(MESH_FORMAT_NODES_ENROL) });
export type MeshConfigNodesEnrol = z.infer<typeof MeshConfigNodesEnrol>;
export type AnyMeshConfig = MeshConfig | MeshConfigNodesEnrol | MeshConfigFiles;
const FormatOnly = z.looseObject({ format: z.unknown() });

const Seed = z.string().regex(/^S[A-Z2-7]{57}$/);
/** ENROL's seed is absent from a directory of format 2 or 1 (`mesh migrate` adds it). */
export const MeshSeeds = z.strictObject({
  operator: Seed,
  system: Seed,
  mesh: Seed,
  nodes: Seed,
  enrol: Seed.optional(),
});
export type MeshSeeds = z.infer<typeof MeshSeeds>;

const denied = (code: string | undefined) => code === "EACCES" || code === "EPERM";

/** A mesh directory is 0700, its files 0600: read by anyone else, it is a question of who runs the command. */
function deniedLine(path: string): string {
  return `cannot read ${path}: permission denied (a mesh directory is its owner's alone: run this as that user)`;
}

/**
 * A directory made by a mesh-host whose bus took passwords: its nodes hold passwords and its servers a user list,
 * which the keyed bus has no place for, so nothing (`mesh migrate` neither) carries it over.
 */
export function madeWithPasswords(dir: string): string {
  return `${dir} was made by an older mesh-host whose bus took passwords (it has no accounts.json), which this mesh-host's bus does not: make a new mesh with \`mesh-host mesh init\` and enrol its nodes there`;
}

/** A directory whose enrolling users are NODES' (format 2, or 1 before it): `mesh migrate` carries it forward. */
export function beforeEnrol(dir: string): string {
  return `${dir} was made before enrolling users had an account of their own (format ${MESH_FORMAT_NODES_ENROL}): run \`mesh-host mesh migrate\` once to make it`;
}

/** Why mesh.json is not there: no mesh at all, or one this user may not look into (stat says which). */
function absentWhy(dir: string, file: string): string {
  try {
    statSync(file);
  } catch (e) {
    if (denied((e as NodeJS.ErrnoException).code)) return deniedLine(dir);
  }
  return `${dir} is not a mesh (no mesh.json): run \`mesh-host mesh init\``;
}

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
    if (!existsSync(file)) throw new MeshRefused(absentWhy(this.dir, file));
    const format = this.parsed(file, FormatOnly).format;
    if (format === MESH_FORMAT_FILES)
      throw new MeshRefused(
        `${this.dir} keeps its nodes in files (format ${MESH_FORMAT_FILES}): run \`mesh-host mesh migrate\` once to move them onto the bus`,
      );
    if (format === MESH_FORMAT_NODES_ENROL) {
      // the password bus wrote format 2 too: asked first, so it is never told to migrate
      this.seeds();
      throw new MeshRefused(beforeEnrol(this.dir));
    }
    return this.parsed(file, MeshConfig);
  }

  /** mesh.json of any format: only `mesh migrate` reads an older directory. */
  anyConfig(): AnyMeshConfig {
    const file = this.path("mesh.json");
    if (!existsSync(file)) throw new MeshRefused(absentWhy(this.dir, file));
    return this.parsed(file, z.union([MeshConfig, MeshConfigNodesEnrol, MeshConfigFiles]));
  }

  /** accounts.json as it is (ENROL's seed absent before `mesh migrate`); refused when the password bus made it. */
  seeds(): MeshSeeds {
    const file = this.path("accounts.json");
    if (!existsSync(file)) throw new MeshRefused(madeWithPasswords(this.dir));
    return this.parsed(file, MeshSeeds);
  }

  /**
   * The operator's and accounts' keys; a directory made by an older `init` (passwords, or no ENROL) is refused,
   * never misread.
   */
  accountKeys(): AccountKeys {
    const seeds = this.seeds();
    if (!seeds.enrol) throw new MeshRefused(beforeEnrol(this.dir));
    const keys = keysOfSeeds({ ...seeds, enrol: seeds.enrol });
    if (!keys)
      throw new MeshRefused(`${this.path("accounts.json")} holds a seed that is not an Ed25519 nkey seed`);
    return keys;
  }

  signingKey(): KeyObject {
    return createPrivateKey(readFileSync(this.path("signing.key")));
  }

  certPem(): string {
    return readFileSync(this.path("tls", "cert.pem"), "utf8");
  }

  /** The servers, of a directory of either format (migrate reaches the bus of a format-1 one). */
  servers(): ServerEntry[] {
    return this.anyConfig().servers;
  }

  urls(): string[] {
    return this.servers().map((s) => `nats://${s.host}:${s.port}`);
  }

  parsed<T>(file: string, schema: z.ZodType<T>): T {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new MeshRefused(denied(code) ? deniedLine(file) : `cannot read ${file}: ${code ?? "not JSON"}`);
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
