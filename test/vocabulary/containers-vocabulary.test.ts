// The container vocabulary on arrival (containers.md): every field, addresses that are addresses, an ip inside
// the subnet its network declares, and what a container reads or joins declared before it. No runtime needed.
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { machineRuntimes, shortRef } from "../../src/system/arch/runtime.ts";
import { inSubnet, parseDeclaration, type Refusal } from "../../src/vocabulary/index.ts";
import { tempDir } from "../support/tmp.ts";

const decl = (resources: unknown[]) => ({ v: 1, node: "n1", mode: "converged", resources });
const refusals = (resources: unknown[]): Refusal[] => {
  const r = parseDeclaration(decl(resources));
  return r.ok ? [] : r.refusals;
};
const c = (extra: Record<string, unknown> = {}) => ({
  id: "web",
  type: "container",
  name: "web",
  image: "nginx:1.27",
  ...extra,
});
const net = (extra: Record<string, unknown> = {}) => ({
  id: "net",
  type: "network",
  name: "webnet",
  subnet: "10.9.0.0/24",
  ...extra,
});

describe("container resources on arrival", () => {
  it("takes every field of containers.md, with defaults filled in", () => {
    const r = parseDeclaration(
      decl([
        { id: "img", type: "image", ref: "registry.example:5000/team/app@sha256:" + "a".repeat(64) },
        net({ gateway: "10.9.0.1", internal: true }),
        { id: "vol", type: "volume", name: "data", labels: { tier: "db" }, remove_data: true },
        { id: "env", type: "file", path: "/srv/web/env", content: "A=1\n" },
        c({
          image: "img",
          command: ["nginx", "-g", "daemon off;"],
          env: { A: "1" },
          env_files: ["/srv/web/env"],
          mounts: [
            { type: "bind", source: "/srv/web/env", target: "/etc/env", read_only: true },
            { type: "volume", source: "data", target: "/data" },
          ],
          ports: [{ host: 8080, container: 80, address: "::1" }],
          networks: [{ name: "webnet", aliases: ["www"], ip: "10.9.0.10" }],
          dns: ["10.9.0.53", "2001:db8::53"],
          restart: "unless-stopped",
          labels: { "org.example/app": "web" },
          user: "1000:1000",
          init: true,
          restart_on: ["env"],
          state: "stopped",
        }),
      ]),
    );
    expect(r.ok, JSON.stringify(r)).toBe(true);
    const web = r.ok ? r.value.resources[4] : undefined;
    expect(web).toMatchObject({
      ports: [{ protocol: "tcp" }],
      mounts: [{ read_only: true }, { read_only: false }],
    });
  });

  it("refuses a name where an address belongs: dns and every ip", () => {
    expect(refusals([c({ dns: ["resolver.local"] })])).toEqual([
      { id: "web", field: "dns.0", reason: expect.stringMatching(/must be an IP address, not a name/) },
    ]);
    expect(refusals([net(), c({ networks: [{ name: "webnet", ip: "web.internal" }] })])).toEqual([
      { id: "web", field: "networks.0.ip", reason: expect.stringMatching(/must be an IP address/) },
    ]);
    expect(refusals([net({ gateway: "gw" })])[0]?.field).toBe("gateway");
  });

  it("refuses an ip outside the subnet of the network declared with it, or on one without a subnet", () => {
    expect(refusals([net(), c({ networks: [{ name: "webnet", ip: "10.10.0.5" }] })])).toEqual([
      {
        id: "web",
        field: "networks.0.ip",
        reason: 'is outside network "webnet"\'s subnet 10.9.0.0/24'.replace(/^/, "10.10.0.5 "),
      },
    ]);
    expect(
      refusals([net({ subnet: undefined }), c({ networks: [{ name: "webnet", ip: "10.9.0.5" }] })])[0]
        ?.reason,
    ).toMatch(/declared without a subnet/);
    expect(refusals([c({ networks: [{ name: "bridge", ip: "172.17.0.9" }] })])[0]?.field).toBe(
      "networks.0.ip",
    );
  });

  it("refuses what a container reads or joins when it is declared after the container", () => {
    const late = refusals([
      c({ image: "img", env_files: ["/srv/env"], networks: [{ name: "webnet" }] }),
      { id: "env", type: "file", path: "/srv/env", content: "A=1" },
      net(),
      { id: "img", type: "image", ref: "nginx:1.27" },
    ]).map((r) => r.field);
    expect(late.sort()).toEqual(["env_files.0", "image", "networks.0.name"]);
  });

  it("refuses restart_on naming nothing declared, names given twice, two runtimes, the host's labels", () => {
    expect(refusals([c({ restart_on: ["ghost"] })])[0]).toMatchObject({ field: "restart_on" });
    expect(refusals([c(), c({ id: "web2" })])[0]).toMatchObject({ id: "web2", field: "name" });
    expect(refusals([net({ runtime: "docker" }), c({ runtime: "podman" })]).map((r) => r.field)).toEqual([
      "runtime",
      "runtime",
    ]);
    expect(refusals([c({ labels: { "mesh-host.spec": "forged" } })])[0]?.field).toBe("labels.mesh-host.spec");
  });

  it("holds each runtime name unique among its own kind only (the kinds' unique keys), naming the earlier", () => {
    const said = (resources: unknown[]) => refusals(resources).map((r) => `${r.id}.${r.field}: ${r.reason}`);
    expect(said([c(), c({ id: "web2" })])).toEqual(['web2.name: is also the name of "web"']);
    const vol = (id: string) => ({ id, type: "volume", name: "webnet" });
    expect(said([net(), vol("v1"), vol("v2")])).toEqual(['v2.name: is also the name of "v1"']);
    // a network, a volume and a container may share a name: the runtime keeps them apart
    expect(said([net(), vol("v1"), c({ name: "webnet" })])).toEqual([]);
    // a host port two running containers publish: the runtime would refuse the second at its start
    const port = (host: number, extra: Record<string, unknown> = {}) => ({ host, container: 80, ...extra });
    expect(
      said([c({ ports: [port(8080)] }), c({ id: "web2", name: "web2", ports: [port(9090), port(8080)] })]),
    ).toEqual(['web2.ports.1: *:8080/tcp is also published by "web"']);
    // another address, another protocol, or a stopped container binds nothing of the other's
    expect(
      said([
        c({ ports: [port(8080)] }),
        c({ id: "a", name: "aa", ports: [port(8080, { address: "127.0.0.1" })] }),
        c({ id: "u", name: "uu", ports: [port(8080, { protocol: "udp" })] }),
        c({ id: "s", name: "ss", state: "stopped", ports: [port(8080)] }),
      ]),
    ).toEqual([]);
    // one static address on one network, given to two running containers
    const on = (ip: string, extra: Record<string, unknown> = {}) => ({
      networks: [{ name: "webnet", ip }],
      ...extra,
    });
    expect(said([net(), c(on("10.9.0.10")), c({ id: "db", name: "db", ...on("10.9.0.10") })])).toEqual([
      'db.networks.0.ip: 10.9.0.10 on network "webnet" is also given to "web"',
    ]);
    expect(
      said([
        net(),
        c(on("10.9.0.10")),
        c({ id: "db", name: "db", ...on("10.9.0.10", { state: "stopped" }) }),
      ]),
    ).toEqual([]);
    expect(said([net(), c(on("10.9.0.10")), c({ id: "db", name: "db", ...on("10.9.0.11") })])).toEqual([]);
    // a file a container reads is what the declaration makes (the file kind's madeOf), whichever kind makes it
    expect(said([{ id: "d", type: "directory", path: "/srv/d" }, c({ env_files: ["/srv/d"] })])).toEqual([]);
    expect(said([c({ env_files: ["/srv/d"] }), { id: "d", type: "directory", path: "/srv/d" }])).toEqual([
      'web.env_files.0: is written by "d", declared after it',
    ]);
  });

  it("refuses forms the runtime would misread: a comma in a mount, a ref that is a flag, an unknown field", () => {
    expect(refusals([c({ mounts: [{ type: "bind", source: "/a,b", target: "/x" }] })])[0]?.field).toBe(
      "mounts.0.source",
    );
    expect(refusals([c({ image: "--privileged" })])[0]?.field).toBe("image");
    expect(refusals([c({ name: "a" })])[0]?.field).toBe("name");
    expect(refusals([c({ privileged: true })])[0]).toMatchObject({
      field: "privileged",
      reason: "unknown field",
    });
    expect(refusals([{ id: "i", type: "image", ref: "a:1", pull: "never", load: "/a.tar" }])[0]?.field).toBe(
      "load",
    );
  });
});

describe("addresses and references", () => {
  it("knows which addresses lie in a subnet, IPv4 and IPv6", () => {
    expect(inSubnet("10.9.0.255", "10.9.0.0/24")).toBe(true);
    expect(inSubnet("10.9.1.0", "10.9.0.0/24")).toBe(false);
    expect(inSubnet("2001:db8::53", "2001:db8::/64")).toBe(true);
    expect(inSubnet("2001:db9::53", "2001:db8::/64")).toBe(false);
    expect(inSubnet("10.9.0.1", "2001:db8::/64")).toBe(false);
  });

  it("compares references as docker and podman spell them", () => {
    expect(shortRef("busybox")).toBe(shortRef("docker.io/library/busybox:latest"));
    expect(shortRef("localhost/mesh-test/busybox:1")).toBe(shortRef("mesh-test/busybox:1"));
    expect(shortRef("registry:5000/a")).toBe("registry:5000/a:latest");
  });
});

describe("the runtime found on the machine", () => {
  const bins = (...names: string[]) => {
    const dir = tempDir();
    mkdirSync(join(dir, "bin"));
    for (const n of names) {
      writeFileSync(join(dir, "bin", n), "#!/bin/sh\n");
      chmodSync(join(dir, "bin", n), 0o755);
    }
    return join(dir, "bin");
  };
  it("is the one the declaration names, else docker where its daemon answers, else podman", () => {
    const both = bins("docker", "podman");
    expect(machineRuntimes({ PATH: both, DOCKER_HOST: "unix:///x.sock" }).find(undefined)).toMatchObject({
      kind: "docker",
      env: { DOCKER_HOST: "unix:///x.sock" },
    });
    expect(machineRuntimes({ PATH: both, DOCKER_HOST: "unix:///x.sock" }).find("podman")).toMatchObject({
      kind: "podman",
    });
    expect(machineRuntimes({ PATH: bins("podman") }).find(undefined)).toMatchObject({ kind: "podman" });
    expect(machineRuntimes({ PATH: bins("podman") }).find("docker")).toBe(
      "docker is not installed on this machine",
    );
    expect(machineRuntimes({ PATH: bins() }).find(undefined)).toMatch(/install docker or podman/);
  });
});
