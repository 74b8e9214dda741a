// image, network, volume, container (containers.md): every field as a zod schema, and what only the whole
// declaration can check. `dns` and every `ip` are addresses or refused here: a name would reach the runtime
// verbatim and be refused at create, after the old container was already gone.
// Each schema is built on its first use (`z.lazy`, see resources.ts): only a declaration naming the type pays.
import * as z from "zod";
import { AbsPath, checkedString, isIP, Name, nameProblem, pathProblem } from "./names.ts";

/** The runtimes refuse a one-character container or volume name. */
const RuntimeName = z.lazy(() =>
  Name.refine((n) => n.length >= 2, "must be at least two characters (the runtime's rule)"),
);
const NoNul = z.lazy(() => z.string().refine((s) => !s.includes("\0"), "must not contain NUL"));

/** The label the host writes its spec digest under; a declaration may not set labels in this namespace. */
export const MESH_LABEL_PREFIX = "mesh-host.";

export const RuntimeKind = z.lazy(() => z.enum(["docker", "podman"]));
export type RuntimeKind = z.infer<typeof RuntimeKind>;

/** Networks a runtime makes itself: no static address can be given on them. */
export const RUNTIME_NETWORKS: ReadonlySet<string> = new Set(["bridge", "host", "none", "default", "podman"]);

export const Address = z.lazy(() =>
  z
    .string()
    .refine(
      (s) => isIP(s) !== 0 && !s.includes("%"),
      "must be an IP address, not a name (a name would reach the runtime verbatim)",
    ),
);

/** Why `s` is not a subnet (address/prefix), or null. */
export function subnetProblem(s: string): string | null {
  const [address, prefix, ...rest] = s.split("/");
  const v = isIP(address ?? "");
  if (rest.length || prefix === undefined || v === 0 || !/^[0-9]{1,3}$/.test(prefix))
    return "must be a subnet such as 10.10.0.0/24";
  if (Number(prefix) > (v === 4 ? 32 : 128)) return `prefix /${prefix} is too long for IPv${v}`;
  return null;
}

const Subnet = z.lazy(() => checkedString(subnetProblem));

/** An address as a number, for subnet arithmetic; IPv4 and IPv6 (an embedded IPv4 tail included). */
function addressBits(a: string): { v: 4 | 6; n: bigint } {
  if (isIP(a) === 4) return { v: 4, n: a.split(".").reduce((n, o) => (n << 8n) | BigInt(o), 0n) };
  let text = a;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const n = addressBits(tail[1]!).n;
    text = `${text.slice(0, tail.index)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const left = head ? head.split(":") : [];
  const right = rest ? rest.split(":") : [];
  const groups = [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  return { v: 6, n: groups.reduce((n, g) => (n << 16n) | BigInt(`0x${g || "0"}`), 0n) };
}

/** True when `ip` lies inside `subnet` (both already checked for form). */
export function inSubnet(ip: string, subnet: string): boolean {
  const [base, prefix] = subnet.split("/") as [string, string];
  const a = addressBits(ip);
  const b = addressBits(base);
  if (a.v !== b.v) return false;
  const width = a.v === 4 ? 32n : 128n;
  const shift = width - BigInt(prefix);
  return a.n >> shift === b.n >> shift;
}

const REF_PATH = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const IMAGE_REF = new RegExp(
  `^(?:[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*(?::[0-9]+)?/)?${REF_PATH}(?:/${REF_PATH})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`,
);

/** name:tag or name@digest (a bare name means :latest). */
export const ImageRef = z.lazy(() =>
  z
    .string()
    .max(255)
    .regex(IMAGE_REF, "must be an image reference such as registry/name:tag or name@sha256:…"),
);

const EnvName = z.lazy(() =>
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"),
);
const LabelKey = z.lazy(() =>
  z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/, "must be a label key: letters, digits, . _ / -")
    .refine(
      (k) => !k.startsWith(MESH_LABEL_PREFIX),
      `must not be in the host's own "${MESH_LABEL_PREFIX}" namespace`,
    ),
);
const Labels = z.lazy(() => z.record(LabelKey, NoNul));
const Principal = /^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10})$/;
const User = z.lazy(() =>
  z.string().refine((u) => {
    const [user, group, ...rest] = u.split(":");
    return !rest.length && Principal.test(user ?? "") && (group === undefined || Principal.test(group));
  }, "must be user or user:group, as names or numeric ids"),
);
/** The runtime's --mount syntax is comma-separated: a path with a comma or a quote would be read as more options. */
const MountPath = z.lazy(() =>
  AbsPath.refine((p) => !/[,"]/.test(p), "must not contain a comma or a double quote"),
);

export const ImageResource = z.lazy(() =>
  z
    .strictObject({
      id: Name,
      type: z.literal("image"),
      ref: ImageRef,
      pull: z.enum(["missing", "always", "never"]).optional(),
      /** A tarball (`docker image save`) a file resource wrote; loaded, then tagged `ref`. */
      load: AbsPath.optional(),
      runtime: RuntimeKind.optional(),
    })
    .superRefine((r, ctx) => {
      if (r.pull !== undefined && r.load !== undefined)
        ctx.addIssue({ code: "custom", path: ["load"], message: "give pull or load, not both" });
    }),
);

export const NetworkResource = z.lazy(() =>
  z
    .strictObject({
      id: Name,
      type: z.literal("network"),
      name: Name,
      driver: Name.default("bridge"),
      subnet: Subnet.optional(),
      gateway: Address.optional(),
      internal: z.boolean().default(false),
      runtime: RuntimeKind.optional(),
    })
    .superRefine((r, ctx) => {
      if (RUNTIME_NETWORKS.has(r.name))
        ctx.addIssue({ code: "custom", path: ["name"], message: `"${r.name}" is the runtime's own network` });
      if (r.gateway !== undefined && r.subnet === undefined)
        ctx.addIssue({ code: "custom", path: ["gateway"], message: "needs a subnet to lie in" });
      const formed =
        r.gateway !== undefined && r.subnet !== undefined && isIP(r.gateway) && !subnetProblem(r.subnet);
      if (formed && !inSubnet(r.gateway!, r.subnet!))
        ctx.addIssue({ code: "custom", path: ["gateway"], message: `is outside the subnet ${r.subnet}` });
    }),
);

export const VolumeResource = z.lazy(() =>
  z.strictObject({
    id: Name,
    type: z.literal("volume"),
    name: RuntimeName,
    driver: Name.default("local"),
    labels: Labels.optional(),
    /** Undeclared, the volume is removed with its data only when this was true; otherwise kept, and said. */
    remove_data: z.boolean().default(false),
    runtime: RuntimeKind.optional(),
  }),
);

const Mount = z.lazy(() =>
  z
    .strictObject({
      type: z.enum(["bind", "volume"]),
      source: z.string(),
      target: MountPath,
      read_only: z.boolean().default(false),
    })
    .superRefine((m, ctx) => {
      const problem =
        m.type === "bind"
          ? (pathProblem(m.source) ??
            (/[,"]/.test(m.source) ? "must not contain a comma or a double quote" : null))
          : (nameProblem(m.source) ?? (m.source.length < 2 ? "must be at least two characters" : null));
      if (problem) ctx.addIssue({ code: "custom", path: ["source"], message: problem });
    }),
);

const Port = z.lazy(() =>
  z.strictObject({
    host: z.number().int().min(1).max(65535),
    container: z.number().int().min(1).max(65535),
    protocol: z.enum(["tcp", "udp", "sctp"]).default("tcp"),
    address: Address.optional(),
  }),
);

const NetworkJoin = z.lazy(() =>
  z
    .strictObject({ name: Name, aliases: z.array(Name).optional(), ip: Address.optional() })
    .superRefine((n, ctx) => {
      if (n.ip !== undefined && RUNTIME_NETWORKS.has(n.name))
        ctx.addIssue({
          code: "custom",
          path: ["ip"],
          message: `a static address is given only on a user-defined network, not "${n.name}"`,
        });
    }),
);

/** Each value of `items` by `key`, flagged when given twice. */
function unique<T>(items: T[] | undefined, key: (t: T) => string, field: string, ctx: z.RefinementCtx) {
  const seen = new Set<string>();
  (items ?? []).forEach((item, i) => {
    const k = key(item);
    if (seen.has(k))
      ctx.addIssue({ code: "custom", path: [field, i], message: `${k} is given more than once` });
    seen.add(k);
  });
}

export const ContainerResource = z.lazy(() =>
  z
    .strictObject({
      id: Name,
      type: z.literal("container"),
      name: RuntimeName,
      /** An image resource's id declared before this container, or a reference. */
      image: ImageRef,
      command: z.array(NoNul).min(1, "must name a program").optional(),
      env: z.record(EnvName, NoNul).optional(),
      env_files: z.array(AbsPath).optional(),
      mounts: z.array(Mount).optional(),
      ports: z.array(Port).optional(),
      networks: z.array(NetworkJoin).optional(),
      dns: z.array(Address).optional(),
      restart: z.enum(["no", "always", "unless-stopped", "on-failure"]).default("no"),
      labels: Labels.optional(),
      user: User.optional(),
      init: z.boolean().default(false),
      restart_on: z.array(Name).optional(),
      state: z.enum(["running", "stopped"]).default("running"),
      /** On an adopted node: replace the container found under this name rather than hold it. */
      takes: z.boolean().optional(),
      runtime: RuntimeKind.optional(),
    })
    .superRefine((r, ctx) => {
      unique(r.env_files, (p) => p, "env_files", ctx);
      unique(r.mounts, (m) => m.target, "mounts", ctx);
      unique(r.networks, (n) => n.name, "networks", ctx);
      unique(r.ports, (p) => `${p.address ?? "*"}:${p.host}/${p.protocol}`, "ports", ctx);
    }),
);

export type ImageResource = z.infer<typeof ImageResource>;
export type NetworkResource = z.infer<typeof NetworkResource>;
export type VolumeResource = z.infer<typeof VolumeResource>;
export type ContainerResource = z.infer<typeof ContainerResource>;
