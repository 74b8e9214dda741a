// One runtime port over docker and podman (containers.md, "Asking the runtime"): the same appliers run on
// either, every call goes through `ports.exec`, every question is type-scoped (`container inspect`, never a
// bare `inspect`, which resolves across object kinds: a network named like the container answers for it),
// and an apply asks about all it declares of a kind in one call, kept for the apply (a session).
import { closeSync, existsSync } from "node:fs";
import { join } from "node:path";
import { RUNTIME_CALL_TIMEOUT_MS } from "../../defaults.ts";
import { type ContainerResource, isIP, type RuntimeKind } from "../../vocabulary/index.ts";
import type { Exec, ExecResult } from "../exec.ts";
import { openFileAt, underRoot } from "../index.ts";

// named in src/defaults.ts with every other timeout; said here too, so the driver's surface is unchanged
export { CONTAINER_STOP_TIMEOUT_S, CONTAINER_STOP_WAIT_MS, RUNTIME_PULL_TIMEOUT_MS } from "../../defaults.ts";
/** At most this many names in one inspect: the exec port keeps a bounded tail of output. */
export const INSPECT_BATCH = 100;
/** The label the spec digest is written under. */
export const SPEC_LABEL = "mesh-host.spec";
/** What a runtime client reads from its environment; passed through, nothing else is. */
const RUNTIME_ENV = [
  "HOME",
  "XDG_RUNTIME_DIR",
  "DOCKER_HOST",
  "DOCKER_CONFIG",
  "DOCKER_CONTEXT",
  "CONTAINER_HOST",
  "CONTAINERS_CONF",
  "CONTAINERS_STORAGE_CONF",
  "CONTAINERS_REGISTRIES_CONF",
];

export interface RuntimeCommand {
  kind: RuntimeKind;
  /** The program and the flags every call starts with. */
  argv: string[];
  /** The client's environment: its socket, its configuration. */
  env: Record<string, string>;
}

export interface RuntimeFinder {
  /** The runtime the declaration names, or the one this machine has; a string says why there is none. */
  find(named: RuntimeKind | undefined): RuntimeCommand | string;
}

function onPath(program: string, path: string): string | null {
  for (const dir of path.split(":")) if (dir && existsSync(join(dir, program))) return join(dir, program);
  return null;
}

/** The machine's runtime: the named one, else docker where its daemon's socket is, else podman, else docker. */
export function machineRuntimes(env: NodeJS.ProcessEnv = process.env): RuntimeFinder {
  const passed = Object.fromEntries(RUNTIME_ENV.flatMap((k) => (env[k] ? [[k, env[k]!]] : [])));
  const path = env.PATH ?? "/usr/local/bin:/usr/bin:/bin";
  return {
    find(named) {
      const docker = onPath("docker", path);
      const podman = onPath("podman", path);
      const cmd = (kind: RuntimeKind, bin: string): RuntimeCommand => ({ kind, argv: [bin], env: passed });
      if (named === "docker")
        return docker ? cmd("docker", docker) : "docker is not installed on this machine";
      if (named === "podman")
        return podman ? cmd("podman", podman) : "podman is not installed on this machine";
      const daemon = env.DOCKER_HOST || existsSync("/var/run/docker.sock") || existsSync("/run/docker.sock");
      if (docker && (daemon || !podman)) return cmd("docker", docker);
      if (podman) return cmd("podman", podman);
      return "no container runtime on this machine: install docker or podman first";
    },
  };
}

/** Runtimes given outright (a test's own daemons): the named one, else the first. */
export function givenRuntimes(cmds: RuntimeCommand[]): RuntimeFinder {
  return {
    find: (named) =>
      (named ? cmds.find((c) => c.kind === named) : cmds[0]) ??
      `${named ?? "a runtime"} is not available here`,
  };
}

export interface ContainerInfo {
  name: string;
  id: string;
  /** created, running, paused, restarting, exited, dead (podman: also configured, stopped). */
  status: string;
  /** The image id it runs, without `sha256:`. */
  image: string;
  /** The spec digest label; absent on a container the host did not make. */
  spec?: string;
}

export interface NetworkInfo {
  name: string;
  driver: string;
  subnets: { subnet: string; gateway?: string }[];
  internal: boolean;
}

export interface VolumeInfo {
  name: string;
  driver: string;
  labels: Record<string, string>;
}

export interface ImageInfo {
  id: string;
}

export type Kind = "container" | "network" | "volume" | "image";
export type InfoOf<K extends Kind> = {
  container: ContainerInfo;
  network: NetworkInfo;
  volume: VolumeInfo;
  image: ImageInfo;
}[K];

/** A runtime's answer: the object, null when it is not there, or why the runtime could not say. */
export type Answer<T> = T | null | { error: string };
export const isError = (a: unknown): a is { error: string } =>
  typeof a === "object" && a !== null && "error" in a;

export const RUNTIME_TYPES: ReadonlySet<string> = new Set(["container", "network", "volume", "image"]);
const MISSING = /no such|not known|not found|unable to find/i;
const stripId = (id: string) => id.replace(/^sha256:/, "");

/** One line of what a failed call said, for a report. */
export function said(r: ExecResult): string {
  if (r.spawnError) return `could not start ${r.spawnError}`;
  if (r.timedOut) return "timed out";
  const text = `${r.stderr}\n${r.stdout}`
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/failed to connect to syslog/.test(l))
    .join("; ");
  return (text || `exit ${r.code ?? r.signal}`).slice(0, 400);
}

/** A reference as its canonical short form, so `busybox`, `docker.io/library/busybox:latest` and podman's
 * `localhost/x:1` for an imported `x:1` compare equal. */
export function shortRef(ref: string): string {
  let r = ref.replace(/^(docker\.io\/library\/|docker\.io\/|index\.docker\.io\/library\/|localhost\/)/, "");
  const last = r.slice(r.lastIndexOf("/") + 1);
  if (!r.includes("@") && !last.includes(":")) r = `${r}:latest`;
  return r;
}

/** The runtime's client: argv through the one command port, with its own environment. */
export class Runtime {
  constructor(
    readonly cmd: RuntimeCommand,
    private readonly exec: Exec,
  ) {}

  get kind(): RuntimeKind {
    return this.cmd.kind;
  }

  run(args: string[], timeoutMs = RUNTIME_CALL_TIMEOUT_MS, fds?: number[]): Promise<ExecResult> {
    return this.exec.run([...this.cmd.argv, ...args], { env: this.cmd.env, timeoutMs, fds });
  }

  /** Run; a failure is a one-line reason. */
  async must(args: string[], timeoutMs?: number, fds?: number[]): Promise<string | { error: string }> {
    const r = await this.run(args, timeoutMs, fds);
    return r.code === 0 ? r.stdout : { error: `${args.slice(0, 2).join(" ")}: ${said(r)}` };
  }

  /** `<kind> inspect` of many names in one call: each answered, or the call's failure for all. */
  async inspect<K extends Kind>(kind: K, names: string[]): Promise<Map<string, Answer<InfoOf<K>>>> {
    const out = new Map<string, Answer<InfoOf<K>>>();
    for (let i = 0; i < names.length; i += INSPECT_BATCH) {
      const batch = names.slice(i, i + INSPECT_BATCH);
      const r = await this.run([kind, "inspect", ...this.format(kind), ...batch]);
      const lines = r.stderr.split("\n").filter((l) => l.trim() && !/failed to connect to syslog/.test(l));
      if (
        r.code !== 0 &&
        (r.spawnError || r.timedOut || !lines.length || lines.some((l) => !MISSING.test(l)))
      ) {
        for (const n of batch) out.set(n, { error: `${kind} inspect: ${said(r)}` });
        continue;
      }
      const found = this.parse(kind, r.stdout) as InfoOf<K>[];
      for (const n of batch) out.set(n, this.match(kind, n, found) as InfoOf<K> | null);
    }
    return out;
  }

  private format(kind: Kind): string[] {
    const id = this.kind === "docker" ? ".Id" : ".ID";
    switch (kind) {
      case "container":
        return [
          "--format",
          `{{json .Name}}\t{{json ${id}}}\t{{json .State.Status}}\t{{json .Image}}\t{{json (index .Config.Labels "${SPEC_LABEL}")}}`,
        ];
      case "image":
        return ["--format", `{{json ${id}}}\t{{json .RepoTags}}\t{{json .RepoDigests}}`];
      case "volume":
        return ["--format", "{{json .Name}}\t{{json .Driver}}\t{{json .Labels}}"];
      case "network":
        // podman's network is not docker's shape: its plain JSON is read instead
        return this.kind === "docker"
          ? [
              "--format",
              '{"name":{{json .Name}},"driver":{{json .Driver}},"internal":{{json .Internal}},"ipam":{{json .IPAM.Config}}}',
            ]
          : [];
    }
  }

  private parse(kind: Kind, stdout: string): unknown[] {
    if (kind === "network" && this.kind === "podman") {
      const all = stdout.trim() ? (JSON.parse(stdout) as Record<string, unknown>[]) : [];
      return all.map((n) => ({
        name: n.name as string,
        driver: n.driver as string,
        internal: Boolean(n.internal),
        subnets: ((n.subnets as { subnet: string; gateway?: string }[] | null) ?? []).map((s) => ({
          subnet: s.subnet,
          gateway: s.gateway || undefined,
        })),
      }));
    }
    const rows = stdout.split("\n").filter((l) => l.trim());
    return rows.map((line) => {
      if (kind === "network") {
        const n = JSON.parse(line) as { name: string; driver: string; internal: boolean; ipam: unknown };
        const ipam = (n.ipam as { Subnet?: string; Gateway?: string }[] | null) ?? [];
        return {
          name: n.name,
          driver: n.driver,
          internal: n.internal,
          subnets: ipam.flatMap((c) =>
            c.Subnet ? [{ subnet: c.Subnet, gateway: c.Gateway || undefined }] : [],
          ),
        } satisfies NetworkInfo;
      }
      const f = line.split("\t").map((v) => JSON.parse(v) as unknown);
      if (kind === "container")
        return {
          name: String(f[0]).replace(/^\//, ""),
          id: f[1] as string,
          status: f[2] as string,
          image: stripId(f[3] as string),
          spec: (f[4] as string | null) || undefined,
        } satisfies ContainerInfo;
      if (kind === "volume")
        return {
          name: f[0] as string,
          driver: f[1] as string,
          labels: (f[2] as Record<string, string>) ?? {},
        };
      return {
        id: stripId(f[0] as string),
        refs: [...((f[1] as string[]) ?? []), ...((f[2] as string[]) ?? [])],
      };
    });
  }

  private match(kind: Kind, asked: string, found: unknown[]): unknown {
    if (kind !== "image") return (found as { name: string }[]).find((f) => f.name === asked) ?? null;
    const want = shortRef(asked);
    const hit = (found as { id: string; refs: string[] }[]).find(
      (f) => f.id === stripId(asked) || f.refs.some((r) => shortRef(r) === want),
    );
    return hit ? { id: hit.id } : null;
  }
}

/** `container create` for `w` (paths under `root`), and a `network connect` for each network after the first. */
export function createArgv(
  w: ContainerResource,
  root: string,
  image: string,
  spec: string,
): { create: string[]; connects: string[][] } {
  const a = ["container", "create", "--name", w.name, "--label", `${SPEC_LABEL}=${spec}`];
  for (const [k, v] of Object.entries(w.labels ?? {}).sort()) a.push("--label", `${k}=${v}`);
  for (const [k, v] of Object.entries(w.env ?? {}).sort()) a.push("--env", `${k}=${v}`);
  // each env-file is handed over as an fd the host opened with no link followed (envFileFds): a path given to
  // the runtime would be opened by it, as root, following whatever link was swapped in since the check
  for (const [i] of (w.env_files ?? []).entries()) a.push("--env-file", `/dev/fd/${FIRST_EXTRA_FD + i}`);
  for (const m of w.mounts ?? []) {
    const source = m.type === "bind" ? underRoot(root, m.source) : m.source;
    a.push("--mount", `type=${m.type},source=${source},target=${m.target}${m.read_only ? ",readonly" : ""}`);
  }
  for (const p of w.ports ?? []) {
    const at = p.address ? (isIP(p.address) === 6 ? `[${p.address}]:` : `${p.address}:`) : "";
    a.push("--publish", `${at}${p.host}:${p.container}/${p.protocol}`);
  }
  const join = (n: NonNullable<ContainerResource["networks"]>[number]) => [
    ...(n.ip ? [isIP(n.ip) === 6 ? "--ip6" : "--ip", n.ip] : []),
    ...(n.aliases ?? []).flatMap((al) => ["--alias", al]),
  ];
  const [first, ...rest] = w.networks ?? [];
  if (first)
    a.push("--network", first.name, ...join(first).map((x) => (x === "--alias" ? "--network-alias" : x)));
  for (const d of w.dns ?? []) a.push("--dns", d);
  a.push("--restart", w.restart);
  if (w.user) a.push("--user", w.user);
  if (w.init) a.push("--init");
  a.push("--", image, ...(w.command ?? []));
  return { create: a, connects: rest.map((n) => ["network", "connect", ...join(n), n.name, w.name]) };
}

/** The first fd a child inherits beyond stdin, stdout and stderr (ExecOptions.fds). */
const FIRST_EXTRA_FD = 3;

/** An fd on each env-file of `w`, in order, walked afresh (the caller closes them), or why one cannot be opened. */
export function envFileFds(w: ContainerResource, root: string): number[] | string {
  const fds: number[] = [];
  for (const [i, p] of (w.env_files ?? []).entries()) {
    const fd = openFileAt(root, p);
    if (typeof fd === "number") {
      fds.push(fd);
      continue;
    }
    for (const f of fds) closeSync(f);
    return `env_files.${i}: ${fd ?? `${p} does not exist`}`;
  }
  return fds;
}
