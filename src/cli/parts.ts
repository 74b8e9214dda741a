// What a host's composition root (main.ts for the Linux and Arch executable, main-android.ts for Android's) hands
// the commands: the appliers it carries beyond the portable floor, and the parts only some hosts have (the
// overlay, package installs, the operator's commands). A part left out is absent from that executable's bundle
// altogether, because only a root names its module; a command asked for it refuses in one line.
import type { ApplierList } from "../appliers/index.ts";
import type { HostKind } from "../host-kind.ts";
import type { Asking } from "../link/index.ts";
import type { Exec } from "../system/index.ts";
import type { Context } from "./context.ts";

/** At enrolment, a WireGuard tunnel found up and taken: the facts the question carries, the lines said. */
export interface TunnelAtEnrol {
  tunnel?: Asking["tunnel"];
  /** Several found, none taken: their names. */
  interfaces?: string[];
  lines: string[];
}

/** What `status` shows of the overlay: its account for --json, and the lines after `overlay:`. */
export interface OverlayShown {
  status: unknown[];
  lines: string[];
}

export interface HostParts {
  /** The appliers this executable carries beyond the portable floor, for a machine of `kind`. */
  appliers(kind: HostKind): Promise<ApplierList>;
  /** The overlay's part of `enrol`: a tunnel up besides the mesh's, its key taken. */
  tunnelAtEnrol?: (ctx: Context) => Promise<TunnelAtEnrol>;
  /** The overlay's account for `status`, from the state alone (no command is run). */
  overlayStatus?: (ctx: Context) => Promise<OverlayShown>;
  /** Install a release that is a package (pacman -U): why not, or null. */
  installPackage?: (exec: Exec, file: string) => Promise<string | null>;
  /** Commands only this executable carries, each loaded when it runs. */
  commands: Partial<Record<"overlay" | "install-service", (ctx: Context) => Promise<number>>>;
  /** `mesh-host mesh …`, the operator's half: a phone is a node, never a mesh's controller. */
  mesh?: (argv: string[]) => Promise<number>;
}
