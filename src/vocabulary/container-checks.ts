// What the whole declaration says of its containers and the runtime's objects, beyond each resource's schema
// (containers.ts): the keys no two may share (the kinds' `uniqueKeysOf`), and the order and runtime checks.
import type { ContainerResource, ImageResource, NetworkResource, VolumeResource } from "./containers.ts";
import { inSubnet } from "./containers.ts";
import type { UniqueKey } from "./kind.ts";
import type { Refusal } from "./refusal.ts";

/** A runtime object's name: one object of a kind (container, network, volume) per name. */
export const runtimeName =
  (space: string) =>
  (r: { name: string }): UniqueKey[] => [
    { space, key: r.name, field: "name", clash: (earlier) => `is also the name of "${earlier}"` },
  ];

/**
 * A container's name, and what it takes while it runs: each host port it publishes (two running containers
 * cannot bind one address, port and protocol) and each static address on a network (nor hold one address
 * there): the runtime refuses the second at its start, after the first is made. A stopped one holds neither.
 */
export function containerKeys(r: ContainerResource): UniqueKey[] {
  const name = runtimeName("container name")(r);
  if (r.state === "stopped") return name;
  const ports = (r.ports ?? []).map((p, i): UniqueKey => {
    const key = `${p.address ?? "*"}:${p.host}/${p.protocol}`;
    return {
      space: "published port",
      key,
      field: `ports.${i}`,
      clash: (earlier) => `${key} is also published by "${earlier}"`,
    };
  });
  const addresses = (r.networks ?? []).flatMap((n, i): UniqueKey[] =>
    n.ip === undefined
      ? []
      : [
          {
            space: "network address",
            key: `${n.name} ${n.ip}`,
            field: `networks.${i}.ip`,
            clash: (earlier) => `${n.ip} on network "${n.name}" is also given to "${earlier}"`,
          },
        ],
  );
  return [...name, ...ports, ...addresses];
}

type RuntimeResource = ImageResource | NetworkResource | VolumeResource | ContainerResource;

const RUNTIME_TYPES = new Set(["image", "network", "volume", "container"]);

/**
 * What only the whole declaration can say about its containers: an `ip` inside the subnet of the network
 * declared here, what a container reads or joins declared before it (so it is there, and already new, when the
 * container is reached), one runtime. One name per object and `restart_on` naming declared ids are the kinds'
 * facts (resources.ts: `uniqueKeysOf`, `refsOf`), checked with every kind's.
 */
export function containerCrossChecks(
  resources: readonly { id: string; type: string }[],
  made: ReadonlyMap<string, string>,
): Refusal[] {
  const x = crossIndex(resources, made);
  return [
    ...mixedRuntimes(x.all),
    ...x.all.flatMap((r) => [...loadOrder(r, x), ...(r.type === "container" ? containerRefs(r, x) : [])]),
  ];
}

/** What the cross checks look things up in: the runtime's resources, and every one's place in the declaration. */
interface CrossIndex {
  all: RuntimeResource[];
  networks: Map<string, NetworkResource>;
  volumes: Map<string, VolumeResource>;
  images: Map<string, ImageResource>;
  /** A path the declaration makes (its kinds' `madeOf`), to the id that makes it. */
  files: ReadonlyMap<string, string>;
  /** Whether `other` is declared after `id`. */
  after: (id: string, other: string | undefined) => boolean;
}

function crossIndex(
  resources: readonly { id: string; type: string }[],
  made: ReadonlyMap<string, string>,
): CrossIndex {
  const all = resources.filter((r) => RUNTIME_TYPES.has(r.type)) as RuntimeResource[];
  const position = new Map(resources.map((r, i) => [r.id, i]));
  return {
    all,
    networks: new Map(all.flatMap((r) => (r.type === "network" ? [[r.name, r] as const] : []))),
    volumes: new Map(all.flatMap((r) => (r.type === "volume" ? [[r.name, r] as const] : []))),
    images: new Map(all.flatMap((r) => (r.type === "image" ? [[r.id, r] as const] : []))),
    files: made,
    after: (id, other) => other !== undefined && (position.get(other) ?? -1) > (position.get(id) ?? -1),
  };
}

/** One declaration, one runtime: each resource naming one is refused when they name more than one. */
function mixedRuntimes(all: readonly RuntimeResource[]): Refusal[] {
  const runtimes = new Set(all.flatMap((r) => (r.runtime ? [r.runtime] : [])));
  if (runtimes.size <= 1) return [];
  return all.flatMap((r) =>
    r.runtime
      ? [
          {
            id: r.id,
            field: "runtime",
            reason: `declarations name one runtime; this one names ${[...runtimes].join(" and ")}`,
          },
        ]
      : [],
  );
}

/** An image loaded from a file the declaration writes only later. */
function loadOrder(r: RuntimeResource, x: CrossIndex): Refusal[] {
  if (r.type !== "image" || !r.load || !x.after(r.id, x.files.get(r.load))) return [];
  return [{ id: r.id, field: "load", reason: `is written by "${x.files.get(r.load)}", declared after it` }];
}

/** What a container names (its image, networks, mounts, env files, restart_on) declared after it or not at all. */
function containerRefs(r: ContainerResource, x: CrossIndex): Refusal[] {
  const refusals: Refusal[] = [];
  const image = x.images.get(r.image);
  if (image && x.after(r.id, image.id))
    refusals.push({ id: r.id, field: "image", reason: `names "${image.id}", declared after it` });
  refusals.push(...(r.networks ?? []).flatMap((n, i) => networkRefs(r.id, n, i, x)));
  (r.mounts ?? []).forEach((m, i) => {
    const other = m.type === "volume" ? x.volumes.get(m.source)?.id : x.files.get(m.source);
    if (x.after(r.id, other))
      refusals.push({ id: r.id, field: `mounts.${i}.source`, reason: `is declared by "${other}", after it` });
  });
  (r.env_files ?? []).forEach((p, i) => {
    if (x.after(r.id, x.files.get(p)))
      refusals.push({
        id: r.id,
        field: `env_files.${i}`,
        reason: `is written by "${x.files.get(p)}", declared after it`,
      });
  });
  return refusals;
}

/** A container's network declared after it, or a static address its network cannot hold. */
function networkRefs(id: string, n: { name: string; ip?: string }, i: number, x: CrossIndex): Refusal[] {
  const net = x.networks.get(n.name);
  if (!net) return [];
  const refusals: Refusal[] = [];
  if (x.after(id, net.id))
    refusals.push({ id, field: `networks.${i}.name`, reason: `is network "${net.id}", declared after it` });
  if (n.ip === undefined) return refusals;
  if (net.subnet === undefined)
    refusals.push({
      id,
      field: `networks.${i}.ip`,
      reason: `network "${n.name}" is declared without a subnet; a static address needs one`,
    });
  else if (!inSubnet(n.ip, net.subnet))
    refusals.push({
      id,
      field: `networks.${i}.ip`,
      reason: `${n.ip} is outside network "${n.name}"'s subnet ${net.subnet}`,
    });
  return refusals;
}
