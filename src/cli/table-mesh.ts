// The operator's half of the one command table (table.ts): the commands `mesh-host mesh …` takes and the flags
// only they take, read by the same parser, help, man page and completions. It imports no value from table.ts
// (table.ts reads this file while the table is built), only its types.
import { JOBS_KEPT, PLAN_WAIT_S, PUSH_WAIT_S, ROLLOUT_GATE_S, ROLLOUT_WAVES } from "../defaults.ts";
import { MOVE_EXITS, PLAN_EXITS, PUSH_EXITS, ROLLOUT_EXITS } from "./exits.ts";
import type { CommandSpec, Flag } from "./table.ts";
import { RELEASE_COMMANDS } from "./table-release.ts";

const command = (c: CommandSpec): CommandSpec => c;
const flag = (f: Flag): Flag => f;

/** The flags only the operator's commands take, by name (table.ts spreads them into FLAGS). */
export const MESH_FLAGS = {
  "wait-s": flag({
    name: "wait-s",
    value: "S",
    default: String(PUSH_WAIT_S),
    help: "seconds to wait for the reports",
  }),
  where: flag({
    name: "where",
    value: "SELECTOR",
    default: "none",
    help: "the nodes whose labels and facts match (role=web, os!=android, tier in (a,b), !canary; comma = and)",
  }),
  label: flag({
    name: "label",
    value: "KEY=VALUE",
    multiple: true,
    default: "none",
    help: "a label of the node, what --where selects by",
  }),
  serial: flag({
    name: "serial",
    value: "N",
    default: "the newest",
    help: "the report of the push with serial N",
  }),
  canary: flag({
    name: "canary",
    value: "N",
    default: "0",
    help: "the first N nodes alone, before the waves",
  }),
  waves: flag({
    name: "waves",
    value: "LIST",
    default: ROLLOUT_WAVES,
    help: "where each wave ends: a count of nodes or a percentage of them, the last 100%",
  }),
  "gate-s": flag({
    name: "gate-s",
    value: "S",
    default: String(ROLLOUT_GATE_S),
    help: "seconds a wave's nodes have to report applied and send a healthy heartbeat",
  }),
  "max-failed": flag({
    name: "max-failed",
    value: "N",
    default: "0",
    help: "nodes that may fail, refuse or stay silent over the whole rollout before it halts",
  }),
  "on-halt": flag({
    name: "on-halt",
    value: "WHAT",
    default: "revert",
    help: "on a halt, push each changed node its previous declaration again (revert), or leave them (stop)",
    choices: ["revert", "stop"],
  }),
  "allow-removals": flag({
    name: "allow-removals",
    default: "off",
    help: "a node may lose resources it last had from this mesh (else the push is refused, naming them)",
  }),
} as const satisfies Record<string, Flag>;

const CODE_OUT = { "code-file": { default: "standard output", help: "write the enrolment code to F" } };

/** The operator's commands, `mesh-host mesh NAME …` (src/cli/mesh/): two words for `node add` and `node rm`. */
export const MESH_COMMANDS: readonly CommandSpec[] = [
  command({
    name: "init",
    summary: "a new mesh: signing key, TLS certificate, nats-server configuration",
    flags: ["server", "servers", "json"],
    means: {
      server: { value: "HOST:PORT", default: `127.0.0.1:4222`, help: "a server of the mesh, in order" },
    },
  }),
  command({
    name: "up",
    summary: "run the servers and the controller until stopped (or write units)",
    flags: ["only", "unit", "unit-dir"],
  }),
  command({
    name: "node add",
    args: "NAME",
    summary: "add a node; prints its enrolment code (or writes it to F, 0600)",
    flags: ["code-file", "expires", "label"],
    means: CODE_OUT,
  }),
  command({
    name: "node rm",
    args: "NAME",
    summary: "revoke a node: users, consumer, record",
    flags: [],
  }),
  command({
    name: "node reissue",
    args: "NAME",
    summary: "a new code (and credentials): a code lost, or its machine to `enrol --replace`",
    flags: ["code-file"],
    means: CODE_OUT,
  }),
  command({
    name: "node label",
    args: "NAME KEY=VALUE... KEY-...",
    summary: "set (KEY=VALUE) or remove (KEY-) a node's labels",
    about:
      "Labels are the operator's word about a node; facts (os, kind, arch, kernel, hostname, version, cpus, " +
      "memory_mb) are the node's own, said at enrolment, and no label takes a fact's name. --where selects over both.",
    flags: ["json"],
  }),
  command({
    name: "push",
    args: "NAME... FILE",
    summary: "sign and push a declaration, wait for the reports",
    about:
      "FILE is checked with the host's own vocabulary after node, serial, issued_at and each secret are filled " +
      "in per node; then it is signed, published, and each node's report is printed as apply prints it. " +
      "While it waits, a terminal shows how many nodes have reported.",
    flags: ["all", "where", "secret", "allow-removals", "wait-s", "json"],
    exits: PUSH_EXITS,
    means: { secret: { value: "KEY=FILE", help: "a secret sealed to each node, read from FILE" } },
  }),
  ...RELEASE_COMMANDS,
  command({
    name: "plan",
    args: "NAME... FILE",
    summary: "what FILE would do on each node, asked of the node; nothing changes",
    about:
      "FILE is composed and checked as push composes it, signed as a plan request (never a declaration: no " +
      "serial is used and nothing pending is displaced) and sent to each node, which decides as its apply would " +
      "and changes nothing. Each node's plan is printed the way plan prints it, then one line a node: how many " +
      "steps would change, or that it would refuse, or that it did not answer. A node not on the bus is said " +
      "at once; one on it is waited for as long as the wait-s flag says.",
    flags: ["all", "where", "diff", "verbose", "secret", "wait-s", "json"],
    exits: PLAN_EXITS,
    means: {
      secret: { value: "KEY=FILE", help: "a secret sealed to each node, read from FILE" },
      "wait-s": { default: String(PLAN_WAIT_S), help: "seconds a node on the bus has to answer" },
    },
  }),
  command({
    name: "jobs",
    summary: "every push, plan and rollout, newest first: its nodes and their outcomes",
    about: `Kept in the bus's bucket mesh-jobs, the newest ${JOBS_KEPT}, so they outlive a restart of mesh up.`,
    flags: ["json"],
  }),
  command({
    name: "job",
    args: "ID",
    summary: "one job: each node's outcome, its serial, and each failed step and refusal",
    flags: ["json"],
  }),
  command({
    name: "report",
    args: "NAME",
    summary: "a node's full report: every step and detail, holds, refusals, notes",
    about:
      "Read from the REPORTS stream, which keeps a month: the newest, or the one for the push of the serial given.",
    flags: ["serial", "json"],
  }),
  command({
    name: "rollout",
    args: "NAME... FILE",
    summary: "push FILE in waves that stop themselves: canary, health gate, halt and revert",
    about:
      "The canary first, then each wave; a wave starts only when every node before it has reported applied " +
      "and then sent a heartbeat showing it healthy (its last apply this one's, its binary confirmed) within the " +
      "gate. The first node that fails, refuses or stays silent past the gate, once max-failed is spent, halts " +
      "it; revert pushes each changed node its previous declaration again under a new serial. The job record " +
      "holds the progress after every step (rollout status, resume, abort).",
    flags: [
      "all",
      "where",
      "canary",
      "waves",
      "gate-s",
      "max-failed",
      "on-halt",
      "secret",
      "allow-removals",
      "json",
    ],
    exits: ROLLOUT_EXITS,
    means: { secret: { value: "KEY=FILE", help: "a secret sealed to each node, read from FILE" } },
  }),
  command({
    name: "rollout status",
    args: "ID",
    summary: "a rollout's waves, where it stands, each node's outcome",
    flags: ["json"],
  }),
  command({
    name: "rollout resume",
    args: "ID",
    summary: "go on with an interrupted rollout where it stood, touching no node twice",
    flags: ["secret", "json"],
    exits: ROLLOUT_EXITS,
    means: { secret: { value: "KEY=FILE", help: "the secrets the rollout was given, again" } },
  }),
  command({ name: "rollout abort", args: "ID", summary: "stop a rollout before its next wave", flags: [] }),
  command({
    name: "upgrade",
    args: "NAME...",
    summary: "a rollout of each node's current declaration naming release V: canary, waves, gate, halt",
    about:
      "Each node is pushed the declaration this mesh last pushed it, with host.release set to V, in waves as " +
      "rollout makes them; a wave's gate also waits for each node's heartbeat to show V, confirmed. A failure, " +
      "silence past the gate or a report saying the launcher rolled the release back halts it; revert pushes the " +
      "nodes already upgraded their previous declaration (the release they named before, or none). Refused when " +
      "V is not stored for a target's host kind and processor, or a target has had no declaration yet.",
    flags: ["all", "where", "to", "canary", "waves", "gate-s", "max-failed", "on-halt", "json"],
    exits: ROLLOUT_EXITS,
    means: { to: { value: "V", help: "the release, as mesh release ls names it" } },
  }),
  command({ name: "nodes", summary: "the fleet at a glance, silent nodes first", flags: ["where", "json"] }),
  command({ name: "watch", summary: "reports and heartbeats as they arrive", flags: ["where", "json"] }),
  command({
    name: "migrate",
    summary: "carry an older mesh directory forward to this version",
    flags: ["json"],
  }),
  command({
    name: "move",
    args: "NAME",
    summary: "move a node to another mesh made by init",
    flags: ["to", "wait-s", "json"],
    exits: MOVE_EXITS,
  }),
];
