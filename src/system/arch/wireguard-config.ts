// A WireGuard configuration as text: the `[Interface]` of a found one read, the mesh's own rendered, and the
// address arithmetic both need. Pure functions, no command run: the driver (wireguard.ts) reads and writes.
import { isIP, type OverlayResource } from "../../vocabulary/index.ts";

/** What a found `[Interface]` says; the key only so a takeover can compare it, never to show it. */
export interface FoundConfig {
  privateKey: string | null;
  addresses: string[];
  listenPort: number | null;
  /** 0 when the configuration names none. */
  mtu: number;
  peers: number;
}

export function parseConfig(text: string): FoundConfig {
  const found: FoundConfig = { privateKey: null, addresses: [], listenPort: null, mtu: 0, peers: 0 };
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    if (!line) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      section = header[1]!.toLowerCase();
      if (section === "peer") found.peers++;
      continue;
    }
    const eq = line.indexOf("=");
    if (eq < 0 || section !== "interface") continue;
    const key = line.slice(0, eq).trim().toLowerCase();
    const value = line.slice(eq + 1).trim();
    if (key === "privatekey") found.privateKey = value;
    else if (key === "address")
      found.addresses.push(
        ...value
          .split(",")
          .map((a) => a.trim())
          .filter(Boolean),
      );
    else if (key === "listenport") found.listenPort = Number(value) || null;
    else if (key === "mtu") found.mtu = Number(value) || 0;
  }
  return found;
}

/** The network an address is in: "10.8.0.7/24" → "10.8.0.0/24". */
export function rangeOf(cidr: string): string {
  const [ip = "", prefix = ""] = cidr.split("/");
  const family = isIP(ip);
  if (family === 4) {
    const bits = Number(prefix);
    const n = ip.split(".").reduce((acc, o) => acc * 256 + Number(o), 0);
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    const net = (n & mask) >>> 0;
    return `${[24, 16, 8, 0].map((s) => (net >>> s) & 255).join(".")}/${bits}`;
  }
  if (family === 6) {
    const bits = BigInt(prefix);
    const value = v6ToBig(ip);
    const mask = ((1n << 128n) - 1n) ^ ((1n << (128n - bits)) - 1n);
    return `${bigToV6(value & mask)}/${prefix}`;
  }
  return cidr;
}

function v6ToBig(ip: string): bigint {
  const [head = "", tail] = ip.split("::");
  const parts = (s: string) => (s ? s.split(":") : []);
  const h = parts(head);
  const t = tail === undefined ? [] : parts(tail);
  const groups = [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
  return groups.reduce((acc, g) => (acc << 16n) + BigInt(Number.parseInt(g, 16) || 0), 0n);
}

function bigToV6(v: bigint): string {
  const groups = Array.from({ length: 8 }, (_, i) => ((v >> BigInt((7 - i) * 16)) & 0xffffn).toString(16));
  return groups.join(":").replace(/(^|:)0(:0)+(:|$)/, "::");
}

/** The host part of an address with its prefix: "10.8.0.1/24" → "10.8.0.1". */
export const hostOf = (cidr: string): string => cidr.split("/")[0] ?? cidr;

/** The config wg-quick reads for the mesh's interface. Written 0600: it carries the node's private key. */
export function renderConfig(wanted: OverlayResource, privateKeyB64: string): string {
  const lines = [
    `# Written by mesh-host for overlay "${wanted.id}"; a change made here is put back.`,
    "[Interface]",
    `PrivateKey = ${privateKeyB64}`,
    `Address = ${wanted.address}`,
  ];
  if (wanted.listen_port !== undefined) lines.push(`ListenPort = ${wanted.listen_port}`);
  if (wanted.mtu !== undefined) lines.push(`MTU = ${wanted.mtu}`);
  for (const p of wanted.peers) {
    lines.push("", "[Peer]", `PublicKey = ${p.public_key}`, `AllowedIPs = ${p.allowed_ips.join(", ")}`);
    if (p.endpoint !== undefined) lines.push(`Endpoint = ${p.endpoint}`);
    if (p.keepalive_s) lines.push(`PersistentKeepalive = ${p.keepalive_s}`);
  }
  return `${lines.join("\n")}\n`;
}
