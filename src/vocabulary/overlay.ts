// overlay (overlay.md): the node's WireGuard interface as the mesh assigns it. The private key is never here:
// it is the node's overlay key, read from the state directory where the config is written.
// Each schema is built on its first use (`z.lazy`, see resources.ts): only a declaration naming the type pays.
import * as z from "zod";
import type { UniqueKey } from "./kind.ts";
import { checkedString, isIP, Name, nameProblem } from "./names.ts";

/** Where wg-quick reads `<if>.conf`, on the machine (a declared path under the root for writes). */
export const WIREGUARD_DIR = "/etc/wireguard";
export const configPath = (iface: string): string => `${WIREGUARD_DIR}/${iface}.conf`;

/** The kernel's limit on an interface name (IFNAMSIZ less its NUL). */
export const INTERFACE_NAME_MAX = 15;

/** Why `name` is not an interface a declaration may name: the one rule, and at most 15 characters. */
export function interfaceNameProblem(name: unknown): string | null {
  const rule = nameProblem(name);
  if (rule) return rule;
  if ((name as string).length > INTERFACE_NAME_MAX)
    return `must be at most ${INTERFACE_NAME_MAX} characters (an interface name)`;
  return null;
}

/** An address with its prefix length ("10.8.0.1/24", "fd00::1/64"), or why it is not one. */
export function cidrProblem(value: unknown): string | null {
  if (typeof value !== "string") return "must be a string";
  const [ip, prefix, ...rest] = value.split("/");
  if (rest.length || prefix === undefined || !/^[0-9]{1,3}$/.test(prefix))
    return "must be an address with a prefix length, such as 10.8.0.1/24";
  const family = isIP(ip ?? "");
  if (family === 0) return `"${ip}" is not an IP address`;
  if (Number(prefix) > (family === 4 ? 32 : 128)) return `prefix /${prefix} is too long for the address`;
  return null;
}

const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** `host:port` or `[v6]:port`, the form WireGuard's Endpoint takes, or why it is not one. */
export function endpointProblem(value: unknown): string | null {
  if (typeof value !== "string") return "must be a string";
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):([0-9]{1,5})$/.exec(value);
  if (!m) return "must be host:port or [v6 address]:port";
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return "port must be between 1 and 65535";
  if (m[1] !== undefined) return isIP(m[1]) === 6 ? null : `"${m[1]}" is not an IPv6 address`;
  return isIP(m[2]!) === 4 || HOST_NAME.test(m[2]!) ? null : `"${m[2]}" is not an address or a host name`;
}

export const InterfaceName = z.lazy(() => checkedString(interfaceNameProblem));
export const Cidr = z.lazy(() => checkedString(cidrProblem));
/** A WireGuard public key: standard base64, padded, of its raw 32 bytes. */
export const WireguardKey = z.lazy(() =>
  z.string().regex(/^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/, "must be a WireGuard public key"),
);
export const Port = z.lazy(() => z.number().int().min(1).max(65535));

export const OverlayPeer = z.lazy(() =>
  z.strictObject({
    public_key: WireguardKey,
    endpoint: checkedString(endpointProblem).optional(),
    allowed_ips: z.array(Cidr).min(1, "must name at least one range"),
    keepalive_s: z.number().int().min(0).max(65535).optional(),
  }),
);

export const OverlayResource = z.lazy(() =>
  z
    .strictObject({
      id: Name,
      type: z.literal("overlay"),
      interface: InterfaceName,
      address: Cidr,
      listen_port: Port.optional(),
      /** None means no MTU line: wg-quick then picks one from the route (1420 on a 1500 link). */
      mtu: z.number().int().min(576).max(9200).optional(),
      peers: z.array(OverlayPeer),
      /** The found interface this one takes over (overlay.md, ADR 0105). */
      takes: InterfaceName.optional(),
    })
    .superRefine((r, ctx) => {
      if (r.takes !== undefined && r.takes === r.interface)
        ctx.addIssue({
          code: "custom",
          path: ["takes"],
          message:
            "names the interface itself: a takeover brings the found tunnel up under the mesh's own name",
        });
      const seen = new Set<string>();
      r.peers.forEach((p, i) => {
        if (seen.has(p.public_key))
          ctx.addIssue({
            code: "custom",
            path: ["peers", i, "public_key"],
            message: "is given more than once",
          });
        seen.add(p.public_key);
      });
    }),
);

export type OverlayResource = z.infer<typeof OverlayResource>;
export type OverlayPeer = z.infer<typeof OverlayPeer>;

/**
 * An overlay's interface (two writers of one config and one unit), the tunnel it takes (one taker; never an
 * interface the mesh declares: that is not found, it is the mesh's), and the config file it writes (a file there
 * would be overwritten by the overlay on every apply, each undoing the other; a directory there breaks both).
 */
export function overlayKeys(r: OverlayResource): UniqueKey[] {
  const iface: UniqueKey = {
    space: "interface",
    key: r.interface,
    field: "interface",
    clash: (earlier) => `${r.interface} is also declared by "${earlier}"`,
    owns: (owner) =>
      `${r.interface} is the interface "${owner}" declares: a tunnel the mesh declares is not found, it is the mesh's`,
  };
  const config: UniqueKey = {
    space: "path",
    key: configPath(r.interface),
    field: "interface",
    owns: (owner) =>
      `is the configuration the overlay "${owner}" writes; declare the tunnel there, not its file`,
  };
  if (r.takes === undefined) return [iface, config];
  const taken = r.takes;
  const takes: UniqueKey = {
    space: "interface",
    key: taken,
    field: "takes",
    clash: (earlier) => `${taken} is also taken by "${earlier}"`,
  };
  return [iface, takes, config];
}
