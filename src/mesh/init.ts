// `mesh init`: a new mesh directory, whole or not at all — made beside the target and renamed into place.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes, X509Certificate } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
} from "node:fs";
import { isIP } from "node:net";
import { basename, dirname, join } from "node:path";
import {
  CERT_DAYS,
  DEFAULT_MESH_HOST,
  DEFAULT_MESH_PORT,
  MAX_SERVERS,
  MESH_DIR_MODE,
  MESH_FILE_MODE,
  MESH_FORMAT,
  SERVER_PORT_STEP,
} from "../defaults.ts";
import { makeMeshKey } from "../vocabulary/index.ts";
import { makeAccountKeys, seedsOf } from "./accounts.ts";
import { serverConf } from "./conf.ts";
import { syncDir, writeAtomic } from "./files.ts";
import { type MeshConfig, MeshDir, MeshRefused, type ServerEntry } from "./layout.ts";

export interface InitOptions {
  dir: string;
  /** `HOST:PORT` as given, in order; empty: `count` servers on this machine. */
  servers: string[];
  count: number | null;
}

export function secret(): string {
  return randomBytes(24).toString("base64url");
}

/** `HOST:PORT` → a server entry, or a refusal naming the flag. */
export function serverEntryOf(text: string): ServerEntry {
  const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : 0;
  if (!m || port < 1 || port > 65534)
    throw new MeshRefused(`--server must be HOST:PORT (a port from 1 to 65534), not "${text}"`);
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port };
}

export function serverEntries(opts: InitOptions): ServerEntry[] {
  if (opts.servers.length && opts.count !== null && opts.count !== opts.servers.length)
    throw new MeshRefused(`--servers ${opts.count} but ${opts.servers.length} --server given`);
  const entries = opts.servers.length
    ? opts.servers.map(serverEntryOf)
    : Array.from({ length: opts.count ?? 1 }, (_, j) => ({
        host: DEFAULT_MESH_HOST,
        port: DEFAULT_MESH_PORT + j * SERVER_PORT_STEP,
      }));
  if (entries.length < 1 || entries.length > MAX_SERVERS)
    throw new MeshRefused(`--servers must be from 1 to ${MAX_SERVERS}, not ${entries.length}`);
  const seen = new Set(entries.map((e) => `${e.host}:${e.port}`));
  if (seen.size !== entries.length) throw new MeshRefused("--server names the same HOST:PORT twice");
  return entries;
}

/** Refused unless `dir` is absent or an empty directory: a mesh is never overwritten. */
function checkTarget(dir: string): void {
  if (!existsSync(dir)) {
    if (!existsSync(dirname(dir))) throw new MeshRefused(`${dirname(dir)} does not exist`);
    return;
  }
  if (!statSync(dir).isDirectory()) throw new MeshRefused(`${dir} exists and is not a directory`);
  if (readdirSync(dir).length)
    throw new MeshRefused(
      existsSync(join(dir, "mesh.json"))
        ? `${dir} is already a mesh: init never overwrites one`
        : `${dir} is not empty: init makes a mesh only in a new or empty directory`,
    );
}

export function initMesh(opts: InitOptions): MeshConfig {
  const servers = serverEntries(opts);
  checkTarget(opts.dir);
  const staging = join(dirname(opts.dir), `.${basename(opts.dir)}.init-${randomBytes(4).toString("hex")}`);
  mkdirSync(staging, { mode: MESH_DIR_MODE });
  try {
    const config = makeMesh(new MeshDir(staging), servers);
    // the final paths go into the server configurations, so they are rendered once the name is known
    if (existsSync(opts.dir)) rmdirSync(opts.dir);
    renameSync(staging, opts.dir);
    syncDir(dirname(opts.dir));
    const mesh = new MeshDir(opts.dir);
    renderServers(mesh, config);
    return config;
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    throw e;
  }
}

function makeMesh(mesh: MeshDir, servers: ServerEntry[]): MeshConfig {
  chmodSync(mesh.dir, MESH_DIR_MODE);
  for (const sub of ["tls", "servers"]) mkdirSync(mesh.path(sub), { mode: MESH_DIR_MODE });
  const fingerprint = makeCert(mesh, servers);
  const key = makeMeshKey();
  writeAtomic(mesh.path("signing.key"), key.privateKey.export({ format: "pem", type: "pkcs8" }));
  writeAtomic(mesh.path("accounts.json"), `${JSON.stringify(seedsOf(makeAccountKeys()))}\n`);
  const config: MeshConfig = {
    format: MESH_FORMAT,
    servers,
    fingerprint,
    mesh_key: key.publicB64,
    created_at: new Date().toISOString(),
  };
  writeAtomic(mesh.path("mesh.json"), `${JSON.stringify(config, null, 2)}\n`);
  return config;
}

function renderServers(mesh: MeshDir, config: MeshConfig): void {
  const keys = mesh.accountKeys();
  config.servers.forEach((_, j) => {
    const dir = mesh.serverDir(j + 1);
    mkdirSync(join(dir, "jetstream"), { recursive: true, mode: MESH_DIR_MODE });
    mkdirSync(join(dir, "jwt"), { mode: MESH_DIR_MODE });
    writeAtomic(join(dir, "server.conf"), serverConf(mesh, config, keys, j + 1));
  });
}

export interface SelfSigned {
  keyFile: string;
  certFile: string;
  days: number;
  cn: string;
  /** subjectAltName entries, `IP:…` or `DNS:…`. */
  names: string[];
  /** Marked a CA: nats-server's routes check a peer's certificate against it as their root. */
  ca?: boolean;
}

/** A self-signed P-256 certificate and its key, by openssl; throws openssl's failure as execFileSync gives it. */
export function selfSigned(c: SelfSigned): void {
  const ext = c.ca ? ["-addext", "basicConstraints=critical,CA:TRUE"] : [];
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
      .concat(["-keyout", c.keyFile, "-out", c.certFile, "-days", String(c.days), "-subj", `/CN=${c.cn}`])
      .concat(["-addext", `subjectAltName=${c.names.join(",")}`, ...ext]),
    { stdio: ["ignore", "ignore", "pipe"] },
  );
}

/** A self-signed P-256 certificate naming every server's host (the routes check it; nodes pin its digest). */
function makeCert(mesh: MeshDir, servers: ServerEntry[]): string {
  const names = new Set(["IP:127.0.0.1", "DNS:localhost"]);
  for (const s of servers) names.add(isIP(s.host) ? `IP:${s.host}` : `DNS:${s.host}`);
  const keyFile = mesh.path("tls", "key.pem");
  const certFile = mesh.path("tls", "cert.pem");
  try {
    selfSigned({ keyFile, certFile, days: CERT_DAYS, cn: "mesh-host-mesh", names: [...names], ca: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT")
      throw new MeshRefused(
        "openssl is not installed, and mesh init makes the bus's certificate with it (Debian: apt install openssl)",
      );
    const said = String((e as { stderr?: Buffer }).stderr ?? "")
      .trim()
      .split("\n")[0];
    throw new MeshRefused(
      `cannot make the bus's certificate with openssl: ${said || (e as Error).message.split("\n")[0]}`,
    );
  }
  chmodSync(keyFile, MESH_FILE_MODE);
  return createHash("sha256").update(new X509Certificate(mesh.certPem()).raw).digest("hex");
}
