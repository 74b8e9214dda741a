// What a node says of itself: at enrolment, and on every heartbeat so the mesh's record follows a change (a kernel
// upgraded, memory added, a machine renamed). Each a string; `--where` selects by them beside the labels.
import { arch, availableParallelism, hostname, platform, release, totalmem } from "node:os";
import { BUILD } from "../build-info.ts";
import type { HostKind } from "../host-kind.ts";
import type { NodeFacts } from "../vocabulary/index.ts";

export function hostFacts(kind: HostKind): NodeFacts {
  return {
    os: kind === "android" ? "android" : platform(),
    kind,
    arch: arch(),
    kernel: release(),
    hostname: hostname(),
    version: BUILD.version,
    cpus: String(availableParallelism()),
    memory_mb: String(Math.round(totalmem() / 1024 / 1024)),
  };
}
